"""The ``solforge`` command line: thin shells over library functions.

Each subcommand lives in its own module exposing ``register(root)``; errors in the files a user hands
us become clean messages with exit code 2.
"""

from __future__ import annotations

import importlib
import sys

import click

COMMAND_MODULES = (
    "eval_cmd",
    "problems_cmd",
    "extract_cmd",
    "sol_cmd",
    "baseline_cmd",
    "run_cmd",
    "sql_cmd",
    "serve_cmd",
    "report_cmd",
    "export_cmd",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="solforge")
def cli() -> None:
    """solforge: write, judge and plan GPU kernels against a PyTorch reference and the speed-of-light.

    \b
    Example:
      solforge eval tests/fixtures/problems/rmsnorm_small --solution tests/fixtures/solutions/rmsnorm_pytorch.json
    """


def _register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"solforge.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"solforge.cli.{name}":
                continue
            raise
        module.register(cli)


_register_all()


def main() -> None:
    from sol_bench.errors import InputError, JudgeError

    try:
        cli.main(standalone_mode=False)
    except InputError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except JudgeError as e:
        click.echo(f"judge error (not the candidate's fault): {e}", err=True)
        sys.exit(3)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(2 if isinstance(e, click.UsageError) else e.exit_code)
    except SystemExit:
        raise
