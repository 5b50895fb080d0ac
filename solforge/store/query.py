"""DuckDB over the Parquet tables: an in-memory connection with one view per table.

From the duckdb CLI or Python, the same views open with one line::

    duckdb -init data/views.sql          # or: duckdb.connect().execute(open('data/views.sql').read())
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from .schema import TABLES, TABLES_DIR

VIEWS_FILE = "views.sql"


def _glob(data_dir: Path, table: str) -> str:
    return (data_dir.resolve() / TABLES_DIR / table / "**" / "*.parquet").as_posix()


def views_sql(data_dir: Path | str) -> str:
    """CREATE VIEW statements over every table's Parquet files (absolute paths: works from any cwd)."""
    data_dir = Path(data_dir)
    lines = [f"-- solforge results views over {data_dir.resolve().as_posix()}; open with: duckdb -init {VIEWS_FILE}"]
    for name in TABLES:
        path = _glob(data_dir, name).replace("'", "''")
        lines.append(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{path}', "
            f"hive_partitioning = false, union_by_name = true);"
        )
    return "\n".join(lines) + "\n"


def write_views_sql(data_dir: Path | str) -> Path:
    from .writer import _atomic_text

    path = Path(data_dir) / VIEWS_FILE
    text = views_sql(data_dir)
    if not path.exists() or path.read_text() != text:
        _atomic_text(text, path)
    return path


def connect(data_dir: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views; use ``.cursor()`` per thread."""
    from .writer import ResultStore

    data_dir = Path(data_dir)
    ResultStore(data_dir).ensure_layout()
    con = duckdb.connect(":memory:")
    con.execute(views_sql(data_dir))
    return con


def query(data_dir: Path | str, sql: str, params: list | None = None) -> pa.Table:
    con = connect(data_dir)
    try:
        return con.sql(sql, params=params).to_arrow_table()
    finally:
        con.close()
