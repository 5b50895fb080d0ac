"""The Parquet tables of the results store: the single source of truth for their columns.

Every attempt is a row, failures included. Columns are typed; verdicts are strings checked against
``sol_bench.models.Status``; nothing is a JSON blob. Each table names the columns that make a row unique
(its key): the writer skips rows whose key is already stored, which makes a resumed run idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from sol_bench.models import Status

STATUSES: tuple[str, ...] = tuple(s.value for s in Status)

_TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class TableSpec:
    """One table: its name, Arrow schema, unique key and the columns that must be positive when set."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    positive: tuple[str, ...] = ()
    status_column: str | None = None

    @property
    def columns(self) -> list[str]:
        return self.schema.names


def _required(type_: pa.DataType, *names: str) -> list[pa.Field]:
    return [pa.field(n, type_, nullable=False) for n in names]


def _optional(type_: pa.DataType, *names: str) -> list[pa.Field]:
    return [pa.field(n, type_, nullable=True) for n in names]


def _table(
    name: str,
    key: tuple[str, ...],
    *columns: list[pa.Field],
    positive: tuple[str, ...] = (),
    status_column: str | None = None,
) -> TableSpec:
    """A table keyed by ``key`` whose columns, in order, are ``run_id`` (the run that wrote the row), ``columns``
    and ``created_at``."""
    first, last = _required(pa.string(), "run_id"), _required(_TS, "created_at")
    fields = [*first, *(f for group in columns for f in group), *last]
    return TableSpec(name=name, schema=pa.schema(fields), key=key, positive=positive, status_column=status_column)


RUNS = _table(
    "runs", ("run_id", "event", "created_at"),
    _required(pa.string(), "event"),  # 'start' | 'end'
    _optional(pa.string(), "agent", "language", "model", "device"),
    _optional(pa.int32(), "problems", "max_candidates"),
    _optional(pa.float64(), "budget_minutes", "budget_usd", "wall_s"),
)

PROBLEMS = _table(
    "problems", ("run_id", "problem"),
    _required(pa.string(), "problem", "path"),
    _optional(pa.string(), "op_type"),
    _required(pa.int32(), "workloads"),
)

CANDIDATES = _table(
    "candidates", ("run_id", "candidate_id"),
    _required(pa.string(), "candidate_id", "problem"),
    _required(pa.int32(), "attempt"),
    _required(pa.string(), "agent", "language"),
    _optional(pa.string(), "model", "parent_id"),
    _required(pa.string(), "source_hash"),
    _required(pa.int64(), "tokens_in", "tokens_out"),
    _required(pa.float64(), "cost_usd"),
    _optional(pa.float64(), "generate_s"),
)

TRACES = _table(
    "traces", ("run_id", "candidate_id", "workload_uuid"),
    _required(pa.string(), "candidate_id", "problem", "workload_uuid", "status"),
    _optional(pa.string(), "reason"),
    _optional(pa.float64(), "latency_ms", "eager_ms", "t_b_ms", "t_sol_ms"),
    _optional(pa.float64(), "speedup"),  # vs T_b
    _optional(pa.float64(), "speedup_vs_eager", "sol_score", "max_abs_error"),
    _optional(pa.int64(), "seed"),
    _optional(pa.string(), "device"),
    _optional(pa.float64(), "judge_s"),
    positive=("latency_ms", "eager_ms", "t_b_ms", "t_sol_ms", "speedup", "speedup_vs_eager"),
    status_column="status",
)

BASELINES = _table(
    "baselines", ("run_id", "problem", "workload_uuid", "kind", "device"),
    _required(pa.string(), "problem", "workload_uuid", "kind", "device", "status"),  # kind: 'eager' | 'compiled' | ...
    _optional(pa.float64(), "latency_ms", "t_sol_ms"),
    positive=("latency_ms", "t_sol_ms"),
    status_column="status",
)

DECISIONS = _table(
    "decisions", ("run_id", "round", "problem"),
    _required(pa.int32(), "round"),
    _required(pa.string(), "problem"),
    _required(pa.int32(), "attempts"),
    _required(pa.bool_(), "stopped"),
    _optional(pa.float64(), "headroom"),
    _required(pa.string(), "reason"),
    _optional(pa.string(), "planner"),  # 'rules' | 'llm' (the rules' reason says why an LLM's answer was not used)
    _optional(pa.float64(), "cost_usd"),  # what the round's decision cost (on its first row only)
)

# Tables sit one folder down in the data dir, so none lands in a folder that holds something else (the bundled
# problem set is data/problems/, which is also the problems table's name).
TABLES_DIR = "tables"
# What failed outside the judge's verdicts, so one problem's failure is a row and the run goes on: a problem
# that does not load, an agent that raised instead of proposing, a judge that failed twice, a baseline that
# could not be measured. ``stage``: load | generate | judge | baseline.
FAILURES = _table(
    "failures", ("run_id", "problem", "stage", "attempt", "candidate_id"),
    _required(pa.string(), "problem"),  # the problem's name, or its directory when it did not load
    _required(pa.string(), "stage"),
    _optional(pa.int32(), "attempt"),  # the attempt it cost, if any
    _optional(pa.string(), "candidate_id"),
    _optional(pa.string(), "parent_id"),  # the earlier attempt the failed one built on
    _optional(pa.string(), "path"),
    _required(pa.string(), "reason"),
    _optional(pa.string(), "agent"),
    _optional(pa.int64(), "tokens_in", "tokens_out"),
    _optional(pa.float64(), "cost_usd"),
)

TABLES: dict[str, TableSpec] = {
    t.name: t for t in (RUNS, PROBLEMS, CANDIDATES, TRACES, BASELINES, DECISIONS, FAILURES)
}


def spec(name: str) -> TableSpec:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; tables: {sorted(TABLES)}") from None
