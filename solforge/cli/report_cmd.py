"""``solforge report``: a static HTML report of one or more runs."""

from __future__ import annotations

from pathlib import Path

import click

from .options import data_dir_option


@click.command("report")
@click.option("--run", "runs", multiple=True, help="Report this run (repeatable; default: every run).")
@data_dir_option
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Directory to write index.html and the winners' files into.")
def report(runs, data_dir, out_dir) -> None:  # noqa: ANN001 - click's values
    """Write OUTPUT/index.html: speedup and SOL score per problem, the score distribution, best-so-far
    over attempts and over time, results by kind and language, cost and GPU time, and the winners with
    links to their sources and traces (copied under OUTPUT/winners/). The page fetches nothing.

    \b
    Example:
      solforge report --run my-run -o report && xdg-open report/index.html
    """
    from solforge.report import ReportError, build_report

    try:
        index = build_report(data_dir, out_dir, runs or None)
    except ReportError as e:
        raise click.UsageError(str(e)) from None
    click.echo(str(index))


def register(root: click.Group) -> None:
    root.add_command(report)
