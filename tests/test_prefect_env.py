"""The env the embedded Prefect server is started with (no server is started here)."""

from __future__ import annotations

import subprocess

from solforge import prefect_env


class _FakePopen:
    def __init__(self, args: list[str], env: dict[str, str], **_: object) -> None:
        self.args, self.env, self.pid = args, env, 0

    def poll(self) -> int:
        return 0


def test_server_ui_is_told_the_api_port_it_runs_on(tmp_path, monkeypatch):
    started: list[_FakePopen] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(_FakePopen(*a, **k)) or started[-1])
    monkeypatch.setattr(prefect_env, "prefect_executable", lambda: "prefect")
    handle = prefect_env.start_server(tmp_path, port=4321)
    handle.log.close()
    [proc] = started
    assert proc.args[-2:] == ["--port", "4321"]
    assert proc.env["PREFECT_SERVER_UI_API_URL"] == "http://127.0.0.1:4321/api"
    assert handle.env["PREFECT_API_URL"] == "http://127.0.0.1:4321/api"


def test_ui_api_url_is_a_setting_of_the_installed_prefect(monkeypatch):
    from prefect.settings.models.server.ui import ServerUISettings

    monkeypatch.setenv("PREFECT_SERVER_UI_API_URL", "http://127.0.0.1:9/api")
    assert ServerUISettings().api_url == "http://127.0.0.1:9/api"
