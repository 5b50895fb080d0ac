"""A long-lived judge process per Dask worker (``python -m sol_bench serve``), so a candidate does not pay
the judge's start (interpreter, torch import, CUDA context: ~5 s) every time.

The boundary is unchanged: the judge still runs in its own process, apart from the pipeline, and each
candidate still runs in its own sandboxed worker process started by the judge. A server that overruns its
deadline, dies, or reports its own error (exit 3) is killed with everything it started, and the next request
starts a new one. ``JudgeServerPlugin`` gives each Dask worker its server; outside Dask the judge runs
one-shot as before.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from distributed.diagnostics.plugin import WorkerPlugin

from sol_bench.cli import SERVE_DONE

PLUGIN_NAME = "solforge-judge-server"


@dataclass(frozen=True)
class ServedRun:
    returncode: int
    stdout: str
    stderr_tail: str


class ServerOverran(Exception):
    """The request outran its deadline; the server was killed. ``stdout`` holds what it had printed."""

    def __init__(self, stdout: str) -> None:
        super().__init__("judge server overran its deadline")
        self.stdout = stdout


class JudgeServer:
    """One ``sol_bench serve`` process and the thread that reads its stdout."""

    def __init__(self, python: str, env: dict[str, str]) -> None:
        self.key = (python, tuple(sorted(env.items())))
        self._dir = tempfile.TemporaryDirectory(prefix="solforge-judge-server-")
        self._stderr: IO[bytes] = open(Path(self._dir.name) / "stderr.log", "w+b")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [python, "-m", "sol_bench", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True, cwd=self._dir.name, env=env, start_new_session=True, bufsize=1,
        )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # end of stream: the server exited

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _stderr_from(self, offset: int) -> str:
        self._stderr.flush()
        self._stderr.seek(offset)
        text = self._stderr.read().decode(errors="replace")
        self._stderr.seek(0, os.SEEK_END)
        return text[-2000:]

    def request(self, eval_args: list[str], deadline_s: float) -> ServedRun:
        """Run one ``eval`` (its arguments after ``eval``); raises ServerOverran past ``deadline_s``."""
        assert self.proc.stdin is not None
        err_offset = self._stderr.seek(0, os.SEEK_END)
        self.proc.stdin.write(json.dumps(eval_args) + "\n")
        self.proc.stdin.flush()
        out: list[str] = []
        end = time.monotonic() + deadline_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                self.close(graceful=False)
                raise ServerOverran("".join(out)) from None
            if line is None:  # died mid-request: report like a one-shot judge that exited
                rc = self.proc.wait()
                return ServedRun(rc if rc != 0 else 1, "".join(out), self._stderr_from(err_offset))
            if SERVE_DONE in line:
                try:
                    rc = int(json.loads(line)["exit"])
                except (ValueError, KeyError, TypeError):
                    out.append(line)
                    continue
                if rc == 3:
                    self.close()  # it stops by itself after a judge error
                return ServedRun(rc, "".join(out), self._stderr_from(err_offset))
            out.append(line)

    def close(self, graceful: bool = True) -> None:
        from sol_bench.sandbox import kill_tree

        if graceful and self.proc.poll() is None:
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()  # a clean end of input stops the loop
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        kill_tree(self.proc.pid)  # it, and whatever it started (it is their subreaper while it lives)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._stderr.close()
        self._dir.cleanup()


def pinned_env(devices: dict[str, str], worker_name: str | None) -> dict[str, str]:
    """This process's env, with ``CUDA_VISIBLE_DEVICES`` of the named in-process worker when it has one:
    the environment a judge of that worker runs in."""
    env = os.environ.copy()
    if worker_name is not None and worker_name in devices:
        env["CUDA_VISIBLE_DEVICES"] = devices[worker_name]
    return env


def judge_python() -> str:
    """The interpreter that runs the judge: ``$SOLFORGE_JUDGE_PYTHON``, else this one."""
    return os.environ.get("SOLFORGE_JUDGE_PYTHON") or sys.executable


class JudgeServers:
    """The judge server of one Dask worker, one request at a time. A request with another interpreter or
    environment replaces the server, so a worker never holds more than one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: JudgeServer | None = None

    def prestart(self, python: str, env: dict[str, str]) -> None:
        """Start the server now, so it boots (interpreter, torch, CUDA context) while the run starts up; the
        first request with the same interpreter and environment finds it ready or nearly so."""
        with self._lock:
            if self._server is None:
                self._server = JudgeServer(python, env)

    def run(self, python: str, env: dict[str, str], eval_args: list[str], deadline_s: float) -> ServedRun | None:
        """The request's result, or None when this worker's server is busy (the caller runs one-shot)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            key = (python, tuple(sorted(env.items())))
            if self._server is not None and (self._server.key != key or not self._server.alive()):
                self._server.close()
                self._server = None
            if self._server is None:
                self._server = JudgeServer(python, env)
            return self._server.request(eval_args, deadline_s)
        finally:
            self._lock.release()

    def pid(self) -> int | None:
        """The server's process id, if one is running."""
        return self._server.proc.pid if self._server is not None and self._server.alive() else None

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.close()
                self._server = None


class JudgeServerPlugin(WorkerPlugin):
    """Gives a Dask worker its ``JudgeServers``; closes them when the worker stops. ``devices`` (worker name
    -> ``CUDA_VISIBLE_DEVICES`` of the local cluster's device workers): those workers start their server at
    once, in the environment their judge requests will carry."""

    name = PLUGIN_NAME

    def __init__(self, devices: dict[str, str] | None = None) -> None:
        self.devices = dict(devices or {})

    def setup(self, worker) -> None:  # noqa: ANN001 - distributed.Worker
        self.servers = JudgeServers()
        if worker.name in self.devices:
            self.servers.prestart(judge_python(), pinned_env(self.devices, worker.name))

    def teardown(self, worker) -> None:  # noqa: ANN001
        self.servers.close()


def worker_servers() -> JudgeServers | None:
    """This Dask worker's judge server holder, or None outside a worker (or without the plugin)."""
    try:
        from distributed import get_worker

        plugin = get_worker().plugins.get(PLUGIN_NAME)
    except ValueError:
        return None
    return getattr(plugin, "servers", None)
