"""store: append rows to the results tables (validated, atomic, idempotent by key)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from solforge.store import ResultStore, WriteResult
from solforge.store.files import atomic_text
from solforge.store.report_queries import solution_file
from solforge.store.rows import candidate_row

from .common import Failure, Generated, Scored, transient


def _store(data_dir: str | ResultStore) -> ResultStore:
    # a caller that stores many batches passes its ResultStore, whose validation suites are built once
    return data_dir if isinstance(data_dir, ResultStore) else ResultStore(data_dir)


def _write(store: ResultStore, table: str, rows: list[dict[str, Any]]) -> WriteResult:
    return store.append(table, rows)


@task(name="store", retries=2, retry_delay_seconds=1, retry_condition_fn=transient, cache_policy=NO_CACHE)
def store_rows(data_dir: str, table: str, rows: list[dict[str, Any]]) -> WriteResult:
    return _write(ResultStore(data_dir), table, rows)


@task(name="store-candidate", retries=2, retry_delay_seconds=1, retry_condition_fn=transient, cache_policy=NO_CACHE)
def store_candidate(
    data_dir: str | ResultStore, run_id: str, candidate_id: str, problem: str, attempt: int, generated: Generated
) -> WriteResult | None:
    """The solution file first, then its row: a row always has its solution on disk."""
    if generated.candidate is None:
        return None
    store = _store(data_dir)
    path = solution_file(store.data_dir, run_id, candidate_id)
    atomic_text(generated.candidate.solution.model_dump_json(), path)
    row = candidate_row(run_id, candidate_id, problem, attempt, generated.candidate, generated.seconds)
    return _write(store, "candidates", [row])


@task(name="store-traces", retries=2, retry_delay_seconds=1, retry_condition_fn=transient, cache_policy=NO_CACHE)
def store_traces(data_dir: str | ResultStore, scored: Scored) -> WriteResult:
    return _write(_store(data_dir), "traces", scored.rows)


def failure_row(
    run_id: str, problem: str, stage: str, reason: str, *, attempt: int | None = None,
    candidate_id: str | None = None, path: str | None = None, failure: Failure | None = None,
) -> dict[str, Any]:
    """A row of the ``failures`` table: what failed outside a verdict (``stage``), why, and what it cost."""
    row: dict[str, Any] = {"run_id": run_id, "problem": problem, "stage": stage, "reason": reason,
                           "attempt": attempt if attempt is not None and attempt >= 0 else None,
                           "candidate_id": candidate_id, "path": path}  # fmt: skip
    if failure is not None:
        row |= {"agent": failure.agent, "parent_id": failure.parent_id, "tokens_in": failure.tokens_in,
                "tokens_out": failure.tokens_out, "cost_usd": float(failure.cost_usd)}  # fmt: skip
    return row


def store_failures(data_dir: str | ResultStore, rows: list[dict[str, Any]]) -> WriteResult:
    """Plain function, not a task: a failure is stored from the flow process as it is seen."""
    return _write(_store(data_dir), "failures", rows)
