"""Option groups shared by several subcommands."""

from __future__ import annotations

from pathlib import Path

import click


def device_option(f):
    return click.option(
        "--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N: where candidates run."
    )(f)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="One JSON object per line on stdout.")(f)


def data_dir_option(f):
    return click.option(
        "--data-dir", type=click.Path(path_type=Path), envvar="SOLFORGE_DATA", default=Path("data"),
        show_default=True, help="Where results and baselines live (env SOLFORGE_DATA).",
    )(f)  # fmt: skip
