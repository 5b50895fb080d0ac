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
from pathlib import Path
from typing import Iterator


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


@contextmanager
def prefect_server(home: Path, *, port: int | None = None, timeout_s: float = 90.0) -> Iterator[dict[str, str]]:
    """Start ``prefect server start`` with its state under ``home``; yield the env the clients need."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    env = server_env(home)
    api_url = f"http://127.0.0.1:{port}/api"
    pid_file = home / "server.pid"
    stop_stale_server(pid_file)
    log = open(home / "server.log", "ab")
    proc = subprocess.Popen(
        [prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=os.environ | env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pid_file.write_text(str(proc.pid))
    try:
        wait_healthy(api_url, proc, timeout_s)
        yield env | {"PREFECT_API_URL": api_url}
    finally:
        pid_file.unlink(missing_ok=True)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


@contextmanager
def prefect_api(data_dir: Path) -> Iterator[dict[str, str]]:
    """The Prefect env for a run: the configured API if any, else one embedded server under the data dir.

    The returned variables are also exported to this process (and restored afterwards) so that the
    flow and the Dask workers it starts talk to the same API.
    """
    if os.environ.get("PREFECT_API_URL"):
        yield {"PREFECT_API_URL": os.environ["PREFECT_API_URL"]}
        return
    with prefect_server(Path(data_dir) / "prefect") as env:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            if "prefect" in sys.modules:  # settings already loaded from the old environment
                from prefect.settings import PREFECT_API_URL, temporary_settings

                with temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}):
                    yield env
            else:
                yield env
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
