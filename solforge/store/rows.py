"""Rows of the results tables built from pipeline records (candidates, judge traces, baselines)."""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

from agents.base import Candidate, WorkloadFeedback
from sol_bench.models import Solution, Status, Trace

from .validate import sol_score


def candidate_id(run_id: str, problem: str, attempt: int) -> str:
    """Deterministic, so that a resumed run finds the attempts it already made."""
    digest = hashlib.sha256(f"{run_id}\x00{problem}\x00{attempt}".encode()).hexdigest()[:16]
    return f"c{attempt:04d}-{digest}"


def source_hash(solution: Solution) -> str:
    h = hashlib.sha256()
    h.update(solution.spec.model_dump_json().encode())
    for s in sorted(solution.sources, key=lambda s: s.path):
        h.update(b"\x00" + s.path.encode() + b"\x00" + s.content.encode())
    return h.hexdigest()


def candidate_row(
    run_id: str, cid: str, problem: str, attempt: int, cand: Candidate, generate_s: float | None
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "candidate_id": cid,
        "problem": problem,
        "attempt": attempt,
        "agent": cand.agent,
        "language": cand.language,
        "model": cand.model,
        "parent_id": cand.parent_id,
        "source_hash": source_hash(cand.solution),
        "tokens_in": cand.tokens_in,
        "tokens_out": cand.tokens_out,
        "cost_usd": float(cand.cost_usd),
        "generate_s": generate_s,
    }


def trace_rows(
    run_id: str,
    cid: str,
    problem: str,
    traces: Sequence[Trace],
    *,
    device: str,
    judge_s: float | None,
    t_b_ms: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """One row per workload. ``t_b_ms`` maps workload uuid -> baseline time; the eager time stands in."""
    rows = []
    for t in traces:
        ev = t.evaluation
        row: dict[str, Any] = {
            "run_id": run_id,
            "candidate_id": cid,
            "problem": problem,
            "workload_uuid": t.workload.uuid,
            "status": ev.status.value,
            "reason": ev.reason,
            "seed": ev.seed,
            "device": ev.device or device,
            "judge_s": judge_s,
            "t_sol_ms": ev.t_sol_ms if ev.t_sol_ms and ev.t_sol_ms > 0 else None,
            "max_abs_error": ev.correctness.max_absolute_error if ev.correctness else None,
        }
        perf = ev.performance
        if ev.status is Status.PASSED and perf is not None:
            t_k, eager = perf.latency_ms, perf.reference_latency_ms
            t_b = (t_b_ms or {}).get(t.workload.uuid) or eager
            row |= {
                "latency_ms": t_k,
                "eager_ms": eager,
                "t_b_ms": t_b,
                "speedup": t_b / t_k,
                "speedup_vs_eager": eager / t_k,
            }
            if row["t_sol_ms"] is not None:
                row["sol_score"] = sol_score(t_k, t_b, row["t_sol_ms"])
        rows.append(row)
    return rows


def feedback(rows: Sequence[Mapping[str, Any]], logs: Mapping[str, str] | None = None) -> tuple[WorkloadFeedback, ...]:
    """What an agent sees of an attempt, from its trace rows."""
    return tuple(
        WorkloadFeedback(
            workload_uuid=r["workload_uuid"],
            status=r["status"],
            reason=r.get("reason"),
            log_excerpt=(logs or {}).get(r["workload_uuid"], "")[-2000:],
            latency_ms=r.get("latency_ms"),
            t_b_ms=r.get("t_b_ms"),
            t_sol_ms=r.get("t_sol_ms"),
            sol_score=r.get("sol_score"),
            max_abs_error=r.get("max_abs_error"),
        )
        for r in rows
    )
