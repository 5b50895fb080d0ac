"""What the report plots and tabulates, derived from the candidates and winners of some runs.

Conventions follow ``solforge.store.stats``: a problem with no passing candidate counts SOL score 0 and
speedup 1; a candidate's score is its mean SOL score over the workloads it was judged on.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from solforge.store.report_queries import CandidateResult, Winner
from solforge.store.stats import ProblemResult, aggregates

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Curve:
    label: str
    x: list[float]
    y: list[float]


@dataclass(frozen=True)
class GroupRow:
    """Results of the candidates in one group (a kind, a family or a language)."""

    group: str
    problems: int
    solved: int
    attempts: int
    passed: int
    mean_best_sol_score: float
    geomean_best_speedup: float
    cost_usd: float
    gpu_s: float


def _score(c: CandidateResult) -> float:
    return c.sol_score if c.passed and c.sol_score is not None else 0.0


def best_so_far_by_attempt(cands: Sequence[CandidateResult]) -> list[Curve]:
    """Per problem and run: the best SOL score after each attempt (attempt order; 0 until one passes)."""
    by_key: dict[tuple[str, str], list[CandidateResult]] = {}
    for c in cands:
        by_key.setdefault((c.run_id, c.problem), []).append(c)
    runs = {c.run_id for c in cands}
    curves = []
    for (run, problem), cs in sorted(by_key.items()):
        cs.sort(key=lambda c: (c.attempt, c.created_at))
        best, ys = 0.0, []
        for c in cs:
            best = max(best, _score(c))
            ys.append(best)
        label = problem if len(runs) == 1 else f"{problem} ({run})"
        curves.append(Curve(label, [float(i + 1) for i in range(len(ys))], ys))
    return curves


def mean_curve(curves: Sequence[Curve], label: str = "mean over problems") -> Curve:
    """The mean of step curves over a shared integer x; a curve past its end keeps its last value."""
    if not curves:
        return Curve(label, [], [])
    n = max(len(c.y) for c in curves)
    ys = [statistics.fmean(c.y[min(i, len(c.y) - 1)] for c in curves) for i in range(n)]
    return Curve(label, [float(i + 1) for i in range(n)], ys)


def best_over_time(cands: Sequence[CandidateResult]) -> list[Curve]:
    """Per run: the mean over its problems of the best SOL score so far, against minutes since its first
    candidate was made."""
    curves = []
    for run in sorted({c.run_id for c in cands}):
        cs = sorted((c for c in cands if c.run_id == run), key=lambda c: c.created_at)
        problems = sorted({c.problem for c in cs})
        best = dict.fromkeys(problems, 0.0)
        t0 = cs[0].created_at
        xs, ys = [], []
        for c in cs:
            best[c.problem] = max(best[c.problem], _score(c))
            xs.append((c.created_at - t0).total_seconds() / 60.0)
            ys.append(statistics.fmean(best.values()))
        curves.append(Curve(run, xs, ys))
    return curves


def family_of(problem_path: str | None) -> str:
    """The model family a problem was extracted from (its definition's ``family:`` tags), if recorded."""
    if not problem_path:
        return UNKNOWN
    try:
        tags = json.loads((Path(problem_path) / "definition.json").read_text()).get("tags") or []
    except (OSError, ValueError, AttributeError):
        return UNKNOWN
    families = sorted(t.removeprefix("family:") for t in tags if isinstance(t, str) and t.startswith("family:"))
    return "+".join(families) or UNKNOWN


def group_rows(cands: Sequence[CandidateResult], key: Callable[[CandidateResult], str]) -> list[GroupRow]:
    """One row per group; a problem's best is taken over the group's candidates of it only."""
    groups: dict[str, list[CandidateResult]] = {}
    for c in cands:
        groups.setdefault(key(c) or UNKNOWN, []).append(c)
    rows = []
    for g, cs in sorted(groups.items()):
        problems = sorted({c.problem for c in cs})
        best_sol = {p: 0.0 for p in problems}
        best_speedup = {p: 1.0 for p in problems}
        for c in cs:
            if c.passed:
                best_sol[c.problem] = max(best_sol[c.problem], _score(c))
                if c.speedup:
                    best_speedup[c.problem] = max(best_speedup[c.problem], c.speedup)
        rows.append(GroupRow(
            group=g, problems=len(problems), solved=len({c.problem for c in cs if c.passed}),
            attempts=len(cs), passed=sum(c.passed for c in cs),
            mean_best_sol_score=statistics.fmean(best_sol.values()),
            geomean_best_speedup=math.exp(statistics.fmean(math.log(s) for s in best_speedup.values())),
            cost_usd=sum(c.cost_usd for c in cs), gpu_s=sum(c.gpu_s for c in cs),
        ))  # fmt: skip
    return rows


def problem_results(cands: Sequence[CandidateResult], winners: Sequence[Winner]) -> list[ProblemResult]:
    """Per problem over every run asked for, in the shape ``stats.aggregates`` reads."""
    won = {w.problem: w for w in winners}
    out = []
    for p in sorted({c.problem for c in cands}):
        cs = [c for c in cands if c.problem == p]
        w = won.get(p)
        eager = [c.speedup_vs_eager for c in cs if c.passed and c.speedup_vs_eager is not None]
        out.append(ProblemResult(
            problem=p, attempts=len(cs), passed=sum(c.passed for c in cs),
            best_speedup_vs_eager=max(eager) if eager else None,
            best_speedup=w.speedup if w else None, best_sol_score=w.sol_score if w else None,
        ))  # fmt: skip
    return out


def summary(cands: Sequence[CandidateResult], winners: Sequence[Winner]) -> dict[str, float | int | None]:
    """The campaign aggregates (``stats.aggregates``) plus attempts, cost and GPU time."""
    out = dict(aggregates(problem_results(cands, winners)))
    out |= {
        "attempts": len(cands),
        "passed_attempts": sum(c.passed for c in cands),
        "cost_usd": sum(c.cost_usd for c in cands),
        "gpu_hours": sum(c.gpu_s for c in cands) / 3600.0,
        "tokens": sum(c.tokens_in + c.tokens_out for c in cands),
    }
    return out
