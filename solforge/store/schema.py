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


def _f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


RUNS = TableSpec(
    name="runs",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("event", pa.string(), False),  # 'start' | 'end'
        _f("agent", pa.string()),
        _f("language", pa.string()),
        _f("model", pa.string()),
        _f("device", pa.string()),
        _f("problems", pa.int32()),
        _f("max_candidates", pa.int32()),
        _f("budget_minutes", pa.float64()),
        _f("budget_usd", pa.float64()),
        _f("wall_s", pa.float64()),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "event", "created_at"),
)

PROBLEMS = TableSpec(
    name="problems",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("problem", pa.string(), False),
        _f("path", pa.string(), False),
        _f("op_type", pa.string()),
        _f("workloads", pa.int32(), False),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "problem"),
)

CANDIDATES = TableSpec(
    name="candidates",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("candidate_id", pa.string(), False),
        _f("problem", pa.string(), False),
        _f("attempt", pa.int32(), False),
        _f("agent", pa.string(), False),
        _f("language", pa.string(), False),
        _f("model", pa.string()),
        _f("parent_id", pa.string()),
        _f("source_hash", pa.string(), False),
        _f("tokens_in", pa.int64(), False),
        _f("tokens_out", pa.int64(), False),
        _f("cost_usd", pa.float64(), False),
        _f("generate_s", pa.float64()),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "candidate_id"),
)

TRACES = TableSpec(
    name="traces",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("candidate_id", pa.string(), False),
        _f("problem", pa.string(), False),
        _f("workload_uuid", pa.string(), False),
        _f("status", pa.string(), False),
        _f("reason", pa.string()),
        _f("latency_ms", pa.float64()),
        _f("eager_ms", pa.float64()),
        _f("t_b_ms", pa.float64()),
        _f("t_sol_ms", pa.float64()),
        _f("speedup", pa.float64()),  # vs T_b
        _f("speedup_vs_eager", pa.float64()),
        _f("sol_score", pa.float64()),
        _f("max_abs_error", pa.float64()),
        _f("seed", pa.int64()),
        _f("device", pa.string()),
        _f("judge_s", pa.float64()),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "candidate_id", "workload_uuid"),
    positive=("latency_ms", "eager_ms", "t_b_ms", "t_sol_ms", "speedup", "speedup_vs_eager"),
    status_column="status",
)

BASELINES = TableSpec(
    name="baselines",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("problem", pa.string(), False),
        _f("workload_uuid", pa.string(), False),
        _f("kind", pa.string(), False),  # 'eager' | 'compiled' | ...
        _f("device", pa.string(), False),
        _f("status", pa.string(), False),
        _f("latency_ms", pa.float64()),
        _f("t_sol_ms", pa.float64()),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "problem", "workload_uuid", "kind", "device"),
    positive=("latency_ms", "t_sol_ms"),
    status_column="status",
)

DECISIONS = TableSpec(
    name="decisions",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("round", pa.int32(), False),
        _f("problem", pa.string(), False),
        _f("attempts", pa.int32(), False),
        _f("stopped", pa.bool_(), False),
        _f("headroom", pa.float64()),
        _f("reason", pa.string(), False),
        _f("planner", pa.string()),  # 'rules' | 'llm' (the rules' reason says why an LLM's answer was not used)
        _f("cost_usd", pa.float64()),  # what the round's decision cost (on its first row only)
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "round", "problem"),
)

# Tables sit one folder down in the data dir, so none lands in a folder that holds something else (the bundled
# problem set is data/problems/, which is also the problems table's name).
TABLES_DIR = "tables"
# What failed outside the judge's verdicts, so one problem's failure is a row and the run goes on: a problem
# that does not load, an agent that raised instead of proposing, a judge that failed twice, a baseline that
# could not be measured. ``stage``: load | generate | judge | baseline.
FAILURES = TableSpec(
    name="failures",
    schema=pa.schema([
        _f("run_id", pa.string(), False),
        _f("problem", pa.string(), False),  # the problem's name, or its directory when it did not load
        _f("stage", pa.string(), False),
        _f("attempt", pa.int32()),  # the attempt it cost, if any
        _f("candidate_id", pa.string()),
        _f("parent_id", pa.string()),  # the earlier attempt the failed one built on
        _f("path", pa.string()),
        _f("reason", pa.string(), False),
        _f("agent", pa.string()),
        _f("tokens_in", pa.int64()),
        _f("tokens_out", pa.int64()),
        _f("cost_usd", pa.float64()),
        _f("created_at", _TS, False),
    ]),
    key=("run_id", "problem", "stage", "attempt", "candidate_id"),
)

TABLES: dict[str, TableSpec] = {
    t.name: t for t in (RUNS, PROBLEMS, CANDIDATES, TRACES, BASELINES, DECISIONS, FAILURES)
}


def spec(name: str) -> TableSpec:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; tables: {sorted(TABLES)}") from None
