"""Every command has help ending in an example and is listed in the README; the README's commands exist."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from solforge.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def leaf_commands(group: click.Group, prefix: str = "solforge") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out += leaf_commands(cmd, path)
        else:
            out.append((path, cmd))
    return out


COMMANDS = leaf_commands(cli)


def test_the_expected_commands_exist():
    names = {p for p, _ in COMMANDS}
    for expected in ("eval", "problems validate", "problems extract", "sol", "baseline", "run", "sql", "serve"):
        assert f"solforge {expected}" in names


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_command_help_ends_with_an_example(path, cmd):
    args = path.split()[1:] + ["--help"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"{path} --help has no example"
    example = result.output.split("Example")[-1]
    assert path in example, f"{path}: the example does not show the command itself"


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_command_is_in_readme(path, cmd):
    assert f"`{path}" in (ROOT / "README.md").read_text(), f"{path} is missing from README.md"


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "scripts/setup.sh && .venv/bin/solforge run" in readme
    test_cmd = "scripts/setup.sh && .venv/bin/python -m pytest"
    assert test_cmd in readme
    ci = (ROOT / ".ci/run").read_text()
    assert "scripts/setup.sh" in ci and ".venv/bin/python -m pytest" in ci
