"""The judge's side of a candidate process: start it, talk to it with deadlines, end it and its children."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from . import sandbox
from .affinity import format_cpulist
from .errors import (
    CandidateCrash,
    CandidateFailure,
    CandidateTimeout,
    CompileFailure,
    JudgeError,
    RewardHack,
    WrongDtype,
    WrongShape,
)
from .staging import Staged

_MAX_REPLY = 1 << 20
_PASS_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
             "NVIDIA_VISIBLE_DEVICES", "CUTE_DSL_ARCH", "TRITON_PTXAS_PATH")  # fmt: skip
_PASS_PREFIXES = ("NCCL_", "TORCH_SYMM_MEM", "NVSHMEM_", "OMP_", "OPENBLAS_", "MKL_")


def candidate_env(staged: Staged, device: str, interpret_triton: bool = False) -> dict[str, str]:
    """A minimal environment: no API keys or judge settings leak to candidate code; caches in staging."""
    env = {k: v for k, v in os.environ.items() if k in _PASS_ENV or k.startswith(_PASS_PREFIXES)}
    paths = []
    for p in sys.path:
        p = os.path.abspath(p or os.getcwd())
        if os.path.isdir(p) and p not in paths and p != str(staged.src):
            paths.append(p)
    cache = staged.run / "cache"
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        TMPDIR=str(staged.run / "tmp"),
        XDG_CACHE_HOME=str(cache),
        TRITON_CACHE_DIR=str(cache / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
        TORCHINDUCTOR_COMPILE_THREADS="1",  # no compile-worker pool: child processes would look like cheats
        CUDA_CACHE_PATH=str(cache / "nv"),
        TORCH_EXTENSIONS_DIR=str(staged.build),
        CUTE_DSL_CACHE_DIR=str(cache / "cute"),
    )
    env.setdefault("CUTE_DSL_ARCH", "sm_90a")
    if interpret_triton:
        env["TRITON_INTERPRET"] = "1"
    (staged.run / "tmp").mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    return env


@dataclass
class Worker:
    proc: subprocess.Popen
    conn: Connection
    log_path: Path
    own_children_before: set[int]
    timeout_s: float  # the limit on each answer while it starts
    info: dict = field(default_factory=dict)
    noop_wall_ms: float = 0.0  # median judge-clock time of a timed iteration that calls nothing (before load)
    noop_gap_ms: float = 0.0  # median stream-end to device-idle gap of such an iteration (before load)
    noop_wall_min_ms: float = 0.0  # fastest such empty iteration: the least overhead any timed call pays
    noop_wall_spread_ms: float = 0.0  # their interquartile range: jitter the judge's clock cannot resolve

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def request(self, msg: tuple, timeout_s: float) -> list:
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._died() from None
        return self.receive(timeout_s)

    def receive(self, timeout_s: float) -> list:
        try:
            ready = self.conn.poll(max(timeout_s, 0.0))
        except (OSError, EOFError):
            raise self._died() from None
        if not ready:
            raise CandidateTimeout(f"no answer within {timeout_s:.1f} s")
        try:
            raw = self.conn.recv_bytes(_MAX_REPLY)
        except (EOFError, OSError):
            raise self._died() from None
        try:
            reply = json.loads(raw)
        except ValueError:
            raise RewardHack("the candidate process wrote a forged message on the judge's channel") from None
        if not isinstance(reply, list) or not reply or not isinstance(reply[0], str):
            raise RewardHack("the candidate process wrote a forged message on the judge's channel")
        if reply[0] == "fail":
            raise failure(reply, self.log_tail())
        return reply

    def _died(self) -> CandidateCrash:
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        return CandidateCrash(f"candidate process died (exit code {rc})\n{self.log_tail()}")

    def family(self) -> set[int]:
        """This worker's process, its descendants and its session's members."""
        return {self.pid} | sandbox.descendants(self.pid) | sandbox.session_members(self.pid)

    def stop(self, spare: set[int] | frozenset[int] = frozenset()) -> None:
        """End the worker, its session, its descendants and orphans re-parented to the judge since it started,
        except ``spare`` (another worker of the same judge, such as the reference's, started after this one)."""
        try:
            self.conn.send(("exit",))
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        sandbox.kill_tree(self.proc.pid, self.own_children_before | set(spare))
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()


OUTPUT_MARK = "\n--- candidate output ---\n"  # between a crash's text and the candidate's output appended to it


def failure(reply: list, log: str):
    kind = reply[1] if len(reply) > 1 else "runtime"
    text = str(reply[2]) if len(reply) > 2 else ""
    cls = {"compile": CompileFailure, "shape": WrongShape, "dtype": WrongDtype, "hack": RewardHack}.get(kind, CandidateCrash)
    if log and cls is CandidateCrash:
        text = f"{text}{OUTPUT_MARK}{log[-1500:]}"
    return cls(text)


def spawn_worker(
    staged: Staged,
    device: str,
    entry_file: str,
    function: str,
    dps: bool,
    module_path: Path | None,
    env: dict[str, str],
    timeout_s: float,
    index: int = 0,
    preroll_us: float = 0.0,
    cpus: frozenset[int] | None = None,
    preroll_kind: str = "stream",
    timer: str = "events",
    buffers: str = "shared",
) -> Worker:
    """The worker's process, started: it imports torch and sets up the device while the judge goes on.
    ``handshake`` makes it ready; ``start_worker`` does both."""
    parent_sock, child_sock = socket.socketpair()
    log_path = staged.run / f"worker-{index}.log"
    before = sandbox.descendants(os.getpid())
    argv = [
        sys.executable, "-P", "-B", "-m", "sol_bench.worker", "--fd", str(child_sock.fileno()),
        "--staging", str(staged.root), "--device", device, "--entry-file", entry_file,
        "--function", function, "--dps", "1" if dps else "0", "--module-path", str(module_path or ""),
        "--preroll-us", repr(float(preroll_us)), "--cpus", format_cpulist(cpus) if cpus else "",
        "--preroll-kind", preroll_kind, "--timer", timer, "--buffers", buffers,
    ]  # fmt: skip
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, cwd=staged.run, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            pass_fds=(child_sock.fileno(),), start_new_session=True,
        )  # fmt: skip
    child_sock.close()
    conn = Connection(parent_sock.detach())
    return Worker(proc=proc, conn=conn, log_path=log_path, own_children_before=before, timeout_s=timeout_s)


def handshake(worker: Worker) -> Worker:
    """Measure a spawned worker's empty iterations, then have it load the candidate."""
    t0 = time.monotonic()
    try:
        # Measured before candidate code is imported, so the candidate cannot inflate them: the fixed cost
        # of one timed iteration (flush, resets, syncs, messages) with nothing called, and the gap between
        # the timed stream's end and the device going idle when nothing leaks.
        walls, gaps = [], []
        for _ in range(15):
            p0 = time.perf_counter()
            try:
                r = worker.request(("time_noop",), worker.timeout_s)
            except CandidateFailure as e:  # no candidate code has run yet: the judge's environment is broken
                raise JudgeError(f"the candidate process failed before loading the candidate: {e}") from e
            walls.append((time.perf_counter() - p0) * 1e3)
            gaps.append(max(0.0, float(r[2]) - float(r[1])))
        ordered = sorted(walls)
        worker.noop_wall_ms = ordered[len(ordered) // 2]
        worker.noop_wall_min_ms = ordered[0]
        worker.noop_wall_spread_ms = ordered[3 * len(ordered) // 4] - ordered[len(ordered) // 4]
        worker.noop_gap_ms = sorted(gaps)[len(gaps) // 2]
        reply = worker.request(("load",), worker.timeout_s)
    except BaseException:
        worker.stop()
        raise
    worker.info = reply[1] if len(reply) > 1 and isinstance(reply[1], dict) else {}
    worker.info["start_seconds"] = time.monotonic() - t0
    return worker


def start_worker(*args, **kwargs) -> Worker:
    """A worker ready for requests: ``spawn_worker`` (same arguments) then ``handshake``."""
    return handshake(spawn_worker(*args, **kwargs))
