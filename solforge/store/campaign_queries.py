"""Queries behind ``solforge run`` (the campaign and the one-problem flow): what a run stored, what it spent,
the baselines it scores against and what earlier runs in the same data dir learned about its problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .query import connect
from .report_queries import candidate_results, run_ids


@dataclass(frozen=True)
class RunTotals:
    """A run's stored candidates, its spend (candidates, failed attempts and planner calls) and last round."""

    candidates: int
    spent_usd: float
    last_round: int  # -1 before the planner first ran
    failures: int


@dataclass
class RunAttempts:
    """What one run stored per attempt: candidates in attempt order, their trace rows, failed attempts."""

    candidates: list[dict[str, Any]] = field(default_factory=list)  # problem, candidate_id, attempt
    traces: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # candidate id -> trace rows
    last_failed: dict[str, int] = field(default_factory=dict)  # problem -> highest attempt that failed


@dataclass(frozen=True)
class EarlierAttempt:
    """A judged candidate of an earlier run: where its solution is, its verdicts and how good it was."""

    run_id: str
    candidate_id: str
    problem: str
    passed: bool
    sol_score: float | None
    speedup: float | None
    traces: list[dict[str, Any]]


def baseline_times(data_dir: Path | str, problem: str, device: str) -> dict[str, float]:
    """Workload uuid -> the latest T_b measured for ``problem`` on ``device`` (empty: eager stands in)."""
    con = connect(data_dir)
    try:
        rows = con.sql(
            "SELECT workload_uuid, arg_max(latency_ms, created_at) AS t_b FROM baselines "
            "WHERE problem = ? AND device = ? AND kind = 't_b' AND status = 'PASSED' GROUP BY 1",
            params=[problem, device],
        ).fetchall()
    finally:
        con.close()
    return {uuid: t_b for uuid, t_b in rows if t_b}


def run_totals(data_dir: Path | str, run_id: str) -> RunTotals:
    con = connect(data_dir)
    try:
        n, usd = con.sql(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM candidates WHERE run_id = ?", params=[run_id]
        ).fetchall()[0]
        failures, failed_usd = con.sql(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM failures WHERE run_id = ?", params=[run_id]
        ).fetchall()[0]
        last, planned_usd = con.sql(
            "SELECT coalesce(max(round), -1), coalesce(sum(cost_usd), 0) FROM decisions WHERE run_id = ?",
            params=[run_id],
        ).fetchall()[0]
    finally:
        con.close()
    return RunTotals(int(n), float(usd + failed_usd + planned_usd), int(last), int(failures))


def run_attempts(data_dir: Path | str, run_id: str) -> RunAttempts:
    con = connect(data_dir)
    try:
        cands = con.sql(
            "SELECT problem, candidate_id, attempt FROM candidates WHERE run_id = ? ORDER BY problem, attempt",
            params=[run_id],
        ).to_arrow_table().to_pylist()
        traces = con.sql("SELECT * FROM traces WHERE run_id = ?", params=[run_id]).to_arrow_table().to_pylist()
        failed = con.sql(
            "SELECT problem, max(attempt) FROM failures WHERE run_id = ? AND attempt IS NOT NULL GROUP BY 1",
            params=[run_id],
        ).fetchall()
    finally:
        con.close()
    out = RunAttempts(candidates=cands, last_failed={p: int(a) for p, a in failed})
    for t in traces:
        out.traces.setdefault(t["candidate_id"], []).append(t)
    return out


def earlier_attempts(
    data_dir: Path | str, run_id: str, problems: Sequence[str], limit: int
) -> dict[str, list[EarlierAttempt]]:
    """Per problem, the judged candidates of every other run, oldest first, at most ``limit`` of the newest;
    the best passing one (``report_queries``' ranking: SOL score, then speedup) is always kept and comes last."""
    others = [r for r in run_ids(data_dir) if r != run_id]
    wanted = set(problems)
    if not others or not wanted:
        return {}
    results = [r for r in candidate_results(data_dir, others) if r.problem in wanted and r.workloads > 0]
    con = connect(data_dir)
    try:
        rows = con.sql(
            "SELECT * FROM traces WHERE list_contains(?, run_id) AND list_contains(?, problem) "
            "ORDER BY workload_uuid",
            params=[others, sorted(wanted)],
        ).to_arrow_table().to_pylist()
    finally:
        con.close()
    by_cand: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in rows:
        by_cand.setdefault((t["run_id"], t["candidate_id"]), []).append(t)
    out: dict[str, list[EarlierAttempt]] = {}
    for r in sorted(results, key=lambda r: (r.created_at, r.candidate_id)):
        out.setdefault(r.problem, []).append(EarlierAttempt(
            r.run_id, r.candidate_id, r.problem, r.passed, r.sol_score, r.speedup,
            by_cand.get((r.run_id, r.candidate_id), []),
        ))  # fmt: skip
    for problem, attempts in out.items():
        passing = [a for a in attempts if a.passed]
        best = max(passing, key=lambda a: (a.sol_score or 0.0, a.speedup or 0.0)) if passing else None
        rest = [a for a in attempts if a is not best]
        out[problem] = rest[max(0, len(rest) - limit + (best is not None)):] + ([best] if best else [])
    return out
