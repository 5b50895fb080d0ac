"""One local Prefect server for a run, so that Dask worker processes do not each start a temporary API.

When ``PREFECT_API_URL`` is already set, nothing is started and the configured API is used.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator


class PrefectServerError(RuntimeError):
    """The embedded Prefect server did not become healthy."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prefect_executable() -> str:
    beside = Path(sys.executable).parent / "prefect"
    if beside.exists():
        return str(beside)
    found = shutil.which("prefect")
    if not found:
        raise PrefectServerError("the 'prefect' command is not installed")
    return found


def server_env(home: Path) -> dict[str, str]:
    """Settings shared by the server, the flow process and the workers."""
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": os.environ.get("PREFECT_UI_ENABLED", "true"),
        "PREFECT_LOGGING_LEVEL": os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING"),
    }


def server_process_env(port: int) -> dict[str, str]:
    """What only the server process needs: the Prefect 3.9 UI asks for its API on port 4200 unless told
    (``server.ui.api_url``), whatever port the server listens on."""
    return {"PREFECT_SERVER_UI_API_URL": f"http://127.0.0.1:{port}/api"}


def wait_healthy(api_url: str, proc: subprocess.Popen | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise PrefectServerError(f"prefect server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise PrefectServerError(f"prefect server at {api_url} not healthy after {timeout_s:.0f} s")


def stop_stale_server(pid_file: Path) -> None:
    """A run killed with -9 leaves its server behind (it has its own session); stop it by its pid."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return
    pid_file.unlink(missing_ok=True)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if b"server" in cmdline and any(b"prefect" in part for part in cmdline):
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


@dataclass
class ServerHandle:
    """A started ``prefect server`` process; ``env`` is what its clients need."""

    proc: subprocess.Popen
    env: dict[str, str]
    pid_file: Path
    log: IO[bytes]
    timeout_s: float

    def wait_ready(self) -> None:
        wait_healthy(self.env["PREFECT_API_URL"], self.proc, self.timeout_s)

    def stop(self) -> None:
        self.pid_file.unlink(missing_ok=True)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def start_server(home: Path, *, port: int | None = None, timeout_s: float = 120.0) -> ServerHandle:
    """Start ``prefect server start`` with its state under ``home``; returns before it is healthy."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    env = server_env(home)
    pid_file = home / "server.pid"
    stop_stale_server(pid_file)
    log = open(home / "server.log", "ab")
    proc = subprocess.Popen(
        [prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=os.environ | env | server_process_env(port),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # stopped in order by stop(); a killed run's server is found by its pid file
    )
    pid_file.write_text(str(proc.pid))
    return ServerHandle(proc, env | {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}, pid_file, log, timeout_s)


@contextmanager
def prefect_server(home: Path, *, port: int | None = None, timeout_s: float = 120.0) -> Iterator[dict[str, str]]:
    """A healthy server for the duration of the block; yields the env its clients need."""
    handle = start_server(home, port=port, timeout_s=timeout_s)
    try:
        handle.wait_ready()
        yield handle.env
    finally:
        handle.stop()


@dataclass(frozen=True)
class PrefectAPI:
    env: dict[str, str]
    ready: Callable[[], None]


@contextmanager
def prefect_api(data_dir: Path) -> Iterator[PrefectAPI]:
    """The Prefect API for a run: the configured one if ``PREFECT_API_URL`` is set, else one server under
    ``data_dir/prefect``, started here and stopped at the end. Its variables are exported to this process
    (and restored afterwards) so the flow and the Dask workers started after it share it. Call
    ``ready()`` before the first flow: the server boots while the caller starts its workers.
    """
    if os.environ.get("PREFECT_API_URL"):
        yield PrefectAPI({"PREFECT_API_URL": os.environ["PREFECT_API_URL"]}, lambda: None)
        return
    handle = start_server(Path(data_dir) / "prefect")
    env = handle.env
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        if "prefect" in sys.modules:  # settings already loaded from the old environment
            from prefect.settings import PREFECT_API_URL, temporary_settings

            with temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}):
                yield PrefectAPI(env, handle.wait_ready)
        else:
            yield PrefectAPI(env, handle.wait_ready)
    finally:
        handle.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
