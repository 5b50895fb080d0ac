"""``solforge export``: each problem's winner as a solution directory and as a torch custom op."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import data_dir_option


@click.command("export")
@click.option("--run", "runs", multiple=True, help="Take winners from this run (repeatable; default: every run).")
@click.option("--problem", "problems", multiple=True, help="Export only this problem (repeatable).")
@click.option("--problems", "problem_roots", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="Where to find problem directories whose recorded path is gone (repeatable).")
@data_dir_option
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Directory to write solutions/ and solforge_kernels/ into.")
def export(runs, problems, problem_roots, data_dir, out_dir) -> None:  # noqa: ANN001 - click's values
    """Export the best passing candidate of each problem.

    OUTPUT/solutions/<problem>/solution.json (and its sources) is a solution `solforge eval` accepts;
    OUTPUT/solforge_kernels/ is a Python package: `import solforge_kernels` registers every winner as
    torch.ops.solforge_kernels.<problem>, which runs the winner on the input shapes it was judged on and the
    problem's reference elsewhere. Exit 1 when some winner could not be exported.

    \b
    Example:
      solforge export --run my-run -o exported && PYTHONPATH=exported python -c "import solforge_kernels"
    """
    from solforge.export import export_winners

    result = export_winners(data_dir, out_dir, runs or None, problems or None, problem_roots)
    for e in result.exported:
        click.echo(f"{e.problem}: {e.candidate_id} of run {e.run_id} -> {e.solution_json}  "
                   f"(torch.ops.solforge_kernels.{e.op})")  # fmt: skip
    for problem, why in sorted(result.skipped.items()):
        click.echo(f"skipped: {why}", err=True)
    if result.package is not None:
        click.echo(f"package: {result.package}")
    if not result.exported and not result.skipped:
        click.echo("no passing candidate in the runs asked for", err=True)
        sys.exit(1)
    sys.exit(1 if result.skipped else 0)


def register(root: click.Group) -> None:
    root.add_command(export)
