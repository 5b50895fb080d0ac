"""Append-only Parquet writer: one file per write, atomic, validated, idempotent by key.

Layout: ``<data_dir>/tables/<table>/run_id=<id>/part-<uuid>.parquet`` plus one zero-row ``_schema.parquet`` per
table, so a glob over a table always matches a file (DuckDB raises on an empty glob). A batch that fails
validation is written to ``<data_dir>/rejected/<table>/run_id=<id>/`` with its report beside it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import TABLES, TABLES_DIR, TableSpec, spec
from .validate import BatchValidator, ValidationReport
from .files import atomic_text
from .views import write_views_sql

SCHEMA_FILE = "_schema.parquet"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class StoreError(Exception):
    """A batch could not be stored (not a validation failure: those are kept aside, not raised)."""


@dataclass(frozen=True)
class WriteResult:
    """What one ``append`` did."""

    table: str
    written: int
    skipped: int
    path: Path | None = None
    rejected: Path | None = None
    report: ValidationReport | None = None

    @property
    def ok(self) -> bool:
        return self.rejected is None


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise StoreError(f"run id {run_id!r}: use letters, digits, '_', '.', '-' (max 128)")
    return run_id


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def _atomic_write(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)


class ResultStore:
    """The results store under one data directory. Safe to share between threads of one process."""

    def __init__(self, data_dir: Path | str, *, validator: BatchValidator | None = None) -> None:
        self.data_dir = Path(data_dir)
        self._validator = validator or BatchValidator()
        self._lock = threading.Lock()

    def table_dir(self, table: str) -> Path:
        return self.data_dir / TABLES_DIR / spec(table).name

    def ensure_layout(self) -> None:
        """Write the zero-row schema file of every table that lacks one, and ``views.sql``."""
        for t in TABLES.values():
            f = self.table_dir(t.name) / SCHEMA_FILE
            # rewritten when the table gained columns, so the views have them before any row does
            if not f.exists() or pq.read_schema(f).names != t.schema.names:
                _atomic_write(t.schema.empty_table(), f)
        write_views_sql(self.data_dir)

    def stored_keys(self, table: str, run_id: str) -> set[tuple[Any, ...]]:
        t = spec(table)
        part = self.table_dir(t.name) / f"run_id={check_run_id(run_id)}"
        keys: set[tuple[Any, ...]] = set()
        if not part.is_dir():
            return keys
        for f in sorted(part.glob("part-*.parquet")):
            cols = pq.read_table(f, columns=list(t.key)).to_pydict()
            keys.update(zip(*(cols[k] for k in t.key)))
        return keys

    def _to_table(self, t: TableSpec, rows: list[Mapping[str, Any]]) -> pa.Table:
        now = now_utc()
        filled = []
        for r in rows:
            unknown = set(r) - set(t.columns)
            if unknown:
                raise StoreError(f"{t.name}: unknown columns {sorted(unknown)}")
            row = {c: r.get(c) for c in t.columns}
            if "created_at" in row and row["created_at"] is None:
                row["created_at"] = now
            filled.append(row)
        return pa.Table.from_pylist(filled, schema=t.schema)

    def append(self, table: str, rows: Iterable[Mapping[str, Any]]) -> WriteResult:
        """Validate and write ``rows`` (all of one run); rows whose key is already stored are skipped."""
        t = spec(table)
        rows = list(rows)
        if not rows:
            return WriteResult(table=t.name, written=0, skipped=0)
        run_ids = {r.get("run_id") for r in rows}
        if len(run_ids) != 1:
            raise StoreError(f"{t.name}: one batch holds one run, got {sorted(map(str, run_ids))}")
        run_id = check_run_id(str(run_ids.pop()))
        with self._lock:
            try:
                batch = self._to_table(t, rows)
            except (pa.ArrowInvalid, pa.ArrowTypeError, StoreError) as e:
                return self._reject_raw(t, run_id, rows, str(e))
            stored = self.stored_keys(t.name, run_id)
            if stored:
                key_cols = batch.select(list(t.key)).to_pydict()
                keep = [tuple(v) not in stored for v in zip(*(key_cols[k] for k in t.key))]
                skipped = keep.count(False)
                batch = batch.filter(pa.array(keep, type=pa.bool_()))
            else:
                skipped = 0
            if batch.num_rows == 0:
                return WriteResult(table=t.name, written=0, skipped=skipped)
            report = self._validator.validate(t, batch)
            name = f"part-{uuid.uuid4().hex}.parquet"
            if not report.success:
                where = self.data_dir / "rejected" / t.name / f"run_id={run_id}" / name
                _atomic_write(batch, where)
                atomic_text(json.dumps(_report_json(report), indent=1, default=str), where.with_suffix(".report.json"))
                return WriteResult(table=t.name, written=0, skipped=skipped, rejected=where, report=report)
            path = self.table_dir(t.name) / f"run_id={run_id}" / name
            schema_file = self.table_dir(t.name) / SCHEMA_FILE
            if not schema_file.exists():
                self.ensure_layout()
            _atomic_write(batch, path)
            return WriteResult(table=t.name, written=batch.num_rows, skipped=skipped, path=path, report=report)

    def _reject_raw(self, t: TableSpec, run_id: str, rows: list[Mapping[str, Any]], error: str) -> WriteResult:
        where = self.data_dir / "rejected" / t.name / f"run_id={run_id}" / f"part-{uuid.uuid4().hex}.report.json"
        report = ValidationReport(table=t.name, success=False, failed=(f"schema: {error}",))
        payload = _report_json(report) | {"rows": rows}
        atomic_text(json.dumps(payload, indent=1, default=str), where)
        return WriteResult(table=t.name, written=0, skipped=0, rejected=where, report=report)


def _report_json(report: ValidationReport) -> dict[str, Any]:
    return {"table": report.table, "success": report.success, "failed": list(report.failed), "details": report.details}
