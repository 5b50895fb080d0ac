"""``solforge problems``: check and (see extract_cmd) build problem directories."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import json_option


@click.group("problems")
def problems() -> None:
    """Problem sets: validate directories, extract problems from model architectures.

    \b
    Example:
      solforge problems validate data/problems
    """


@problems.command("validate")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
def validate(dirs, as_json) -> None:
    """Check problem directories (a directory holding many problems is searched).

    With --json: one object per problem with path, problem, valid, error.

    \b
    Example:
      solforge problems validate data/problems --json
    """
    from sol_bench.cli import run_validate

    sys.exit(run_validate(list(dirs), as_json))


def register(root: click.Group) -> None:
    root.add_command(problems)
