"""``solforge serve``: a local Prefect server, the work pool, the deployments of prefect.yaml and a worker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click

POOL = "solforge-local"


def register(root: click.Group) -> None:
    root.add_command(serve)


@click.command("serve")
@click.option("--data-dir", envvar="SOLFORGE_DATA", default="data", show_default=True,
              type=click.Path(file_okay=False), help="Prefect state goes under DATA_DIR/prefect.")
@click.option("--port", type=int, default=4200, show_default=True, help="Port of the Prefect server and UI.")
@click.option("--deploy/--no-deploy", default=True, show_default=True, help="Register prefect.yaml's deployments.")
def serve(data_dir: str, port: int, deploy: bool) -> None:
    """Serve the Prefect UI and API on 127.0.0.1:PORT, register the deployments in prefect.yaml (a nightly
    campaign and an on-demand evaluation) and run a process worker for them until Ctrl-C.

    \b
    Example:
      solforge serve --port 4200   # then: prefect deployment run 'campaign/nightly-campaign'
    """
    from solforge.prefect_env import prefect_executable, prefect_server

    exe = prefect_executable()
    with prefect_server(Path(data_dir) / "prefect", port=port) as env:
        child_env = os.environ | env
        click.echo(f"Prefect UI: http://127.0.0.1:{port}   (export PREFECT_API_URL={env['PREFECT_API_URL']})")
        subprocess.run([exe, "work-pool", "create", POOL, "--type", "process", "--overwrite"], env=child_env, check=True)
        if deploy:
            subprocess.run([exe, "--no-prompt", "deploy", "--all"], env=child_env, check=True)
        try:
            subprocess.run([exe, "worker", "start", "--pool", POOL, "--type", "process"], env=child_env, check=False)
        except KeyboardInterrupt:
            click.echo("stopping", err=True)
