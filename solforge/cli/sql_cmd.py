"""``solforge sql``: SQL over every run and attempt (DuckDB views over the Parquet tables)."""

from __future__ import annotations

import csv
import json
import sys

import click


def register(root: click.Group) -> None:
    root.add_command(sql)


def _text_table(names: list[str], rows: list[tuple]) -> str:
    cells = [[("" if v is None else str(v)) for v in r] for r in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(names), line(["-" * w for w in widths])] + [line(r) for r in cells])


@click.command("sql")
@click.argument("query")
@click.option("--json", "fmt", flag_value="json", help="One JSON object per row.")
@click.option("--csv", "fmt", flag_value="csv", help="CSV with a header.")
@click.option("--data-dir", envvar="SOLFORGE_DATA", default="data", show_default=True,
              type=click.Path(file_okay=False), help="Where results are stored (env SOLFORGE_DATA).")
def sql(query: str, fmt: str | None, data_dir: str) -> None:
    """Run QUERY over the tables runs, problems, candidates, traces, baselines, decisions and failures.

    The same views open in the duckdb CLI with: duckdb -init DATA_DIR/views.sql

    \b
    Example:
      solforge sql "SELECT problem, max(sol_score) FROM traces GROUP BY problem" --csv
    """
    import duckdb

    from solforge.store.query import query as run_query

    try:
        table = run_query(data_dir, query)
    except duckdb.Error as e:
        raise click.UsageError(str(e).splitlines()[0]) from None
    rows = table.to_pylist()
    if fmt == "json":
        for r in rows:
            click.echo(json.dumps(r, default=str))
    elif fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(table.column_names)
        for r in rows:
            w.writerow([r[c] for c in table.column_names])
    else:
        click.echo(_text_table(table.column_names, [tuple(r.values()) for r in rows]))
