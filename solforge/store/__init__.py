"""The results store: Parquet tables (schema), an atomic validated writer, DuckDB views."""

from .schema import TABLES, TableSpec, spec
from .writer import ResultStore, StoreError, WriteResult, check_run_id

__all__ = ["TABLES", "TableSpec", "spec", "ResultStore", "StoreError", "WriteResult", "check_run_id"]
