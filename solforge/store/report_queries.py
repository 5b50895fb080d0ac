"""Queries behind ``solforge report`` and ``solforge export``: every candidate of some runs with its verdict,
and each problem's winner.

A candidate passes when every workload it was judged on passed; its score is the mean SOL score over those
workloads and its speedups the geometric means (as in ``stats``). The winner of a problem is its passing
candidate with the highest SOL score (speedup vs T_b breaks ties, then the earlier candidate), over all
the runs asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from .query import connect

SOLUTIONS_DIR = "solutions"


def solution_file(data_dir: Path | str, run_id: str, candidate_id: str) -> Path:
    """Where the campaign stores a candidate's solution.json (the layout ``tasks.store`` writes)."""
    return Path(data_dir) / SOLUTIONS_DIR / f"run_id={run_id}" / f"{candidate_id}.json"


@dataclass(frozen=True)
class CandidateOrigin:
    """Which candidate: its run, problem and attempt, who wrote it, and the problem's kind and directory."""

    run_id: str
    problem: str
    candidate_id: str
    attempt: int
    agent: str
    language: str
    model: str | None
    op_type: str | None
    problem_path: str | None


@dataclass(frozen=True)
class CandidateResult(CandidateOrigin):
    """One judged or unjudged attempt. ``gpu_s`` is the judge's wall time over its workloads."""

    cost_usd: float
    tokens_in: int
    tokens_out: int
    created_at: datetime
    workloads: int
    passed: bool
    status: str | None  # PASSED, the most frequent failing verdict, or None when never judged
    sol_score: float | None
    speedup: float | None
    speedup_vs_eager: float | None
    gpu_s: float


@dataclass(frozen=True)
class Winner(CandidateOrigin):
    """The best passing candidate of one problem; ``problem_path`` is None when no run recorded it."""

    workloads: int
    sol_score: float | None
    speedup: float | None
    speedup_vs_eager: float | None
    cost_usd: float
    gpu_s: float


_CANDIDATES_CTE = """
WITH per_candidate AS (
  SELECT c.run_id, c.problem, c.candidate_id, c.attempt, c.agent, c.language, c.model,
         c.cost_usd, c.tokens_in, c.tokens_out, c.created_at,
         count(t.workload_uuid)::INTEGER AS workloads,
         coalesce(bool_and(t.status = 'PASSED'), false) AND count(t.workload_uuid) > 0 AS passed,
         CASE WHEN count(t.workload_uuid) = 0 THEN NULL
              WHEN bool_and(t.status = 'PASSED') THEN 'PASSED'
              ELSE mode(t.status) FILTER (WHERE t.status <> 'PASSED') END AS status,
         avg(t.sol_score) AS sol_score,
         exp(avg(ln(t.speedup))) AS speedup,
         exp(avg(ln(t.speedup_vs_eager))) AS speedup_vs_eager,
         coalesce(sum(t.judge_s), 0.0) AS gpu_s
  FROM candidates c LEFT JOIN traces t
    ON t.run_id = c.run_id AND t.candidate_id = c.candidate_id
  WHERE list_contains(?, c.run_id)
  GROUP BY ALL
),
kinds AS (
  SELECT run_id, problem, any_value(op_type) AS op_type, any_value(path) AS path
  FROM problems WHERE list_contains(?, run_id) GROUP BY ALL
)
"""

_CANDIDATES_SQL = _CANDIDATES_CTE + """
SELECT pc.*, k.op_type, k.path AS problem_path
FROM per_candidate pc LEFT JOIN kinds k ON k.run_id = pc.run_id AND k.problem = pc.problem
ORDER BY pc.run_id, pc.problem, pc.attempt
"""

_WINNERS_SQL = _CANDIDATES_CTE + """
SELECT * EXCLUDE (rank) FROM (
  SELECT pc.run_id, pc.problem, pc.candidate_id, pc.attempt, pc.agent, pc.language, pc.model,
         k.op_type, k.path AS problem_path, pc.workloads, pc.sol_score, pc.speedup, pc.speedup_vs_eager,
         pc.cost_usd, pc.gpu_s,
         row_number() OVER (PARTITION BY pc.problem
                            ORDER BY pc.sol_score DESC NULLS LAST, pc.speedup DESC NULLS LAST,
                                     pc.created_at, pc.candidate_id) AS rank
  FROM per_candidate pc LEFT JOIN kinds k ON k.run_id = pc.run_id AND k.problem = pc.problem
  WHERE pc.passed
)
WHERE rank = 1
ORDER BY problem
"""


def _rows(data_dir: Path | str, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    con = connect(data_dir)
    try:
        return con.sql(sql, params=params).to_arrow_table().to_pylist()
    finally:
        con.close()


def run_ids(data_dir: Path | str) -> list[str]:
    """Every run that stored a candidate, oldest first."""
    rows = _rows(data_dir, "SELECT run_id FROM candidates GROUP BY run_id ORDER BY min(created_at), run_id", [])
    return [r["run_id"] for r in rows]


def candidate_results(data_dir: Path | str, runs: Sequence[str]) -> list[CandidateResult]:
    runs = list(runs)
    return [CandidateResult(**r) for r in _rows(data_dir, _CANDIDATES_SQL, [runs, runs])]


def winners(data_dir: Path | str, runs: Sequence[str], problems: Sequence[str] | None = None) -> list[Winner]:
    """Each problem's winner over ``runs``; only the named ``problems`` when given."""
    runs = list(runs)
    out = [Winner(**r) for r in _rows(data_dir, _WINNERS_SQL, [runs, runs])]
    if problems:
        wanted = set(problems)
        out = [w for w in out if w.problem in wanted]
    return out


def candidate_traces(data_dir: Path | str, run_id: str, candidate_id: str) -> list[dict[str, Any]]:
    """The trace rows of one candidate, one per workload."""
    return _rows(
        data_dir,
        "SELECT * FROM traces WHERE run_id = ? AND candidate_id = ? ORDER BY workload_uuid",
        [run_id, candidate_id],
    )


def run_events(data_dir: Path | str, runs: Sequence[str]) -> list[dict[str, Any]]:
    """The runs table's start and end rows of ``runs`` (agent, model, device, budgets, wall time)."""
    return _rows(
        data_dir, "SELECT * FROM runs WHERE list_contains(?, run_id) ORDER BY run_id, created_at", [list(runs)]
    )
