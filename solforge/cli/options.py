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


def problem_dirs_under(roots) -> list[Path]:  # noqa: ANN001 - click's tuple of paths
    """Every problem directory at or below each root, in order; a root holding none is a usage error."""
    from sol_bench.problem import find_problems

    out: list[Path] = []
    for root in roots:
        found = find_problems(root)
        if not found:
            raise click.BadParameter(f"{root}: no definition.json at or below it", param_hint="PROBLEM_DIR")
        out += found
    return out
