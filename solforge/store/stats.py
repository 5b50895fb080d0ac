"""Queries the planner and the report run over the results views (DuckDB)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solforge.planning.types import ProblemStats

from .query import connect
from .report_queries import solution_file

# A candidate counts for a problem only when every workload of it passed; its score is the mean SOL
# score and its speedups the geometric means over workloads.
_CANDIDATE_SQL = """
SELECT c.problem, c.candidate_id, c.attempt, c.cost_usd,
       count(t.workload_uuid) AS workloads,
       bool_and(t.status = 'PASSED') AS passed,
       avg(t.sol_score) AS sol_score,
       exp(avg(ln(t.speedup))) AS speedup,
       exp(avg(ln(t.speedup_vs_eager))) AS speedup_vs_eager,
       sum(coalesce(t.judge_s, 0)) / greatest(count(t.workload_uuid), 1) AS judge_s
FROM candidates c LEFT JOIN traces t
  ON t.run_id = c.run_id AND t.candidate_id = c.candidate_id
WHERE c.run_id = ?
GROUP BY ALL
ORDER BY c.problem, c.attempt
"""


def candidate_summaries(data_dir: Path | str, run_id: str) -> list[dict[str, Any]]:
    con = connect(data_dir)
    try:
        return con.sql(_CANDIDATE_SQL, params=[run_id]).to_arrow_table().to_pylist()
    finally:
        con.close()


def problem_stats(data_dir: Path | str, run_id: str, last_round_attempts: dict[str, int] | None = None) -> list[ProblemStats]:
    """Per-problem statistics of a run. ``recent_gain`` is the best-score gain made by the last
    ``last_round_attempts[problem]`` attempts (all attempts when not given)."""
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for r in candidate_summaries(data_dir, run_id):
        if r["workloads"]:
            by_problem.setdefault(r["problem"], []).append(r)
    out = []
    for problem, rows in sorted(by_problem.items()):
        rows.sort(key=lambda r: r["attempt"])
        recent = (last_round_attempts or {}).get(problem, len(rows))
        before, _ = rows[: len(rows) - recent], rows[len(rows) - recent :]

        def best(rs: list[dict[str, Any]], key: str) -> float | None:
            vals = [r[key] for r in rs if r["passed"] and r[key] is not None]
            return max(vals) if vals else None

        best_now, best_before = best(rows, "sol_score"), best(before, "sol_score")
        gain = (best_now or 0.0) - (best_before or 0.0)
        streak = 0
        for r in reversed(rows):
            if r["passed"]:
                break
            streak += 1
        out.append(
            ProblemStats(
                problem=problem,
                attempts=len(rows),
                best_sol_score=best_now,
                best_speedup_vs_baseline=best(rows, "speedup"),
                recent_gain=gain,
                failure_streak=streak,
                cost_usd=float(sum(r["cost_usd"] or 0.0 for r in rows)),
                gpu_minutes=float(sum((r["judge_s"] or 0.0) * r["workloads"] for r in rows)) / 60.0,
            )
        )
    return out


@dataclass(frozen=True)
class ProblemResult:
    """A problem's best results in a run, over the passing candidates other than the bare eager reference (its
    "speedup" over eager is the noise of timing the same code twice); ``reference_only`` when it alone passed."""

    problem: str
    attempts: int
    passed: int
    best_speedup_vs_eager: float | None
    best_speedup: float | None
    best_sol_score: float | None
    reference_only: bool = False


# The eager reference as solforge's own agents offer it: the reference agent's candidate and the offline
# agent's sure pass (``agents/offline/compiled.py``'s ``eager`` variant).
_REFERENCE_AUTHORS = frozenset({"solforge-reference"})
_REFERENCE_SUFFIX = "__ref_eager"


def is_bare_reference(solution: dict[str, Any]) -> bool:
    return solution.get("author") in _REFERENCE_AUTHORS or str(solution.get("name", "")).endswith(_REFERENCE_SUFFIX)


def _bare_reference(data_dir: Path | str, run_id: str, candidate_id: str) -> bool:
    try:
        return is_bare_reference(json.loads(solution_file(data_dir, run_id, candidate_id).read_text()))
    except (OSError, ValueError):
        return False


def problem_results(data_dir: Path | str, run_id: str) -> list[ProblemResult]:
    by_problem: dict[str, list[dict[str, Any]]] = {}
    for r in candidate_summaries(data_dir, run_id):
        r["reference"] = _bare_reference(data_dir, run_id, r["candidate_id"])
        by_problem.setdefault(r["problem"], []).append(r)

    def best(rs: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rs if r["passed"] and not r["reference"] and r[key] is not None]
        return max(vals) if vals else None

    return [
        ProblemResult(
            problem=p,
            attempts=len(rs),
            passed=sum(1 for r in rs if r["passed"]),
            best_speedup_vs_eager=best(rs, "speedup_vs_eager"),
            best_speedup=best(rs, "speedup"),
            best_sol_score=best(rs, "sol_score"),
            reference_only=any(r["passed"] for r in rs) and all(r["reference"] for r in rs if r["passed"]),
        )
        for p, rs in sorted(by_problem.items())
    ]


def aggregates(results: list[ProblemResult]) -> dict[str, float | int | None]:
    """Geomean speedup vs T_b, fraction beating it, fraction > 2x, median and mean SOL score.

    A problem with no passing candidate other than the bare eager reference counts as speedup 1 (the baseline
    still runs) and SOL score 0: the reference is what the user had, not what the run made.
    """
    n = len(results)
    if n == 0:
        return {"problems": 0}
    speedups = [r.best_speedup or 1.0 for r in results]
    sols = [r.best_sol_score or 0.0 for r in results]
    solved = [r for r in results if r.best_speedup is not None]
    return {
        "problems": n,
        "solved": len(solved),
        "geomean_speedup": math.exp(sum(math.log(s) for s in speedups) / n),
        "frac_beat_baseline": sum(1 for s in speedups if s > 1.0) / n,
        "frac_over_2x": sum(1 for s in speedups if s > 2.0) / n,
        "median_sol_score": statistics.median(sols),
        "mean_sol_score": statistics.fmean(sols),
    }
