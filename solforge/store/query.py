"""DuckDB over the Parquet tables: an in-memory connection with one view per table.

From the duckdb CLI or Python, the same views open with one line::

    duckdb -init data/views.sql          # or: duckdb.connect().execute(open('data/views.sql').read())
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from .views import views_sql
from .writer import ResultStore

def connect(data_dir: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views; use ``.cursor()`` per thread."""
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
