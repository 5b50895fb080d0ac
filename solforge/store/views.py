"""The DuckDB views over the Parquet tables, as SQL text (also written to ``<data_dir>/views.sql`` for the CLI)."""

from __future__ import annotations

from pathlib import Path

from .files import atomic_text
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
    path = Path(data_dir) / VIEWS_FILE
    text = views_sql(data_dir)
    if not path.exists() or path.read_text() != text:
        atomic_text(text, path)
    return path
