"""Scores: the SOL score with its guards, speedups, and aggregates. The one module CLI, planner and reports use.

    S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))      0.5 at the baseline T_b, 1.0 at the speed of light

Guards:
- T_k < T_SOL is physically impossible (a cheat, or a bug in the SOL model): flagged ``faster_than_sol``,
  never rewarded (score 0, no speedup counted).
- T_b <= T_SOL leaves the formula without a range: flagged ``baseline_at_sol`` and scored relative to the
  baseline alone, ``S = 0.5 * T_b / T_k`` (0.5 at the baseline, as the formula's anchor).
- A workload the candidate failed scores 0 and has no speedup (``failed``).
"""

from __future__ import annotations

import math
import statistics
from enum import Enum
from typing import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field


class ScoreFlag(str, Enum):
    ok = "ok"
    faster_than_sol = "faster_than_sol"
    baseline_at_sol = "baseline_at_sol"
    failed = "failed"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class WorkloadScore(_Frozen):
    """The score of one candidate on one workload."""

    t_k_ms: float | None = Field(description="Candidate latency; None when it failed the workload.")
    t_b_ms: float = Field(gt=0, description="Optimized PyTorch baseline latency.")
    t_sol_ms: float = Field(ge=0, description="Speed-of-light time.")
    t_eager_ms: float | None = Field(default=None, description="Eager reference latency, if measured.")
    sol_score: float = Field(ge=0, le=1, description="SOL score; 0 when failed or flagged faster than SOL.")
    speedup_vs_baseline: float | None = Field(description="T_b / T_k; None when failed or flagged.")
    speedup_vs_eager: float | None = Field(description="T_eager / T_k; None when unknown, failed or flagged.")
    flag: ScoreFlag = Field(description="ok, or why the score is not the plain formula.")

    @property
    def rewarded(self) -> bool:
        return self.flag in (ScoreFlag.ok, ScoreFlag.baseline_at_sol)


def sol_score(t_k: float | None, t_b: float, t_sol: float, t_eager: float | None = None) -> WorkloadScore:
    """Score one workload (times in ms); ``t_k=None`` means the candidate failed it."""
    if t_b <= 0 or t_sol < 0 or (t_k is not None and t_k <= 0) or (t_eager is not None and t_eager <= 0):
        raise ValueError(f"times must be positive: t_k={t_k}, t_b={t_b}, t_sol={t_sol}, t_eager={t_eager}")
    common = {"t_k_ms": t_k, "t_b_ms": t_b, "t_sol_ms": t_sol, "t_eager_ms": t_eager}
    if t_k is None:
        return WorkloadScore(**common, sol_score=0.0, speedup_vs_baseline=None, speedup_vs_eager=None,
                             flag=ScoreFlag.failed)  # fmt: skip
    if t_k < t_sol:
        return WorkloadScore(**common, sol_score=0.0, speedup_vs_baseline=None, speedup_vs_eager=None,
                             flag=ScoreFlag.faster_than_sol)  # fmt: skip
    if t_b <= t_sol:
        score, flag = min(1.0, 0.5 * t_b / t_k), ScoreFlag.baseline_at_sol
    else:
        score, flag = 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol)), ScoreFlag.ok
    return WorkloadScore(
        **common,
        sol_score=score,
        speedup_vs_baseline=t_b / t_k,
        speedup_vs_eager=t_eager / t_k if t_eager is not None else None,
        flag=flag,
    )


class Aggregate(_Frozen):
    """Summary over workloads (or over problems, see ``aggregate_by_problem``)."""

    n: int = Field(description="Items summarised.")
    n_rewarded: int = Field(description="Items with a speedup (not failed, not flagged faster than SOL).")
    n_faster_than_sol: int = Field(description="Items flagged as faster than the speed of light.")
    geomean_speedup: float | None = Field(description="Geometric mean of T_b / T_k over rewarded items.")
    geomean_speedup_vs_eager: float | None = Field(description="Geometric mean of T_eager / T_k, where known.")
    fraction_beating_baseline: float = Field(description="Items with T_k < T_b, over all items.")
    fraction_over_2x: float = Field(description="Items with T_b / T_k > 2, over all items.")
    median_sol_score: float | None = Field(description="Median SOL score over all items.")
    mean_sol_score: float | None = Field(description="Mean SOL score over all items.")


def _geomean(xs: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _summarise(speedups: list[float | None], eager: list[float | None], scores: list[float], flagged: int) -> Aggregate:
    n = len(scores)
    valid = [s for s in speedups if s is not None]
    return Aggregate(
        n=n,
        n_rewarded=len(valid),
        n_faster_than_sol=flagged,
        geomean_speedup=_geomean(valid),
        geomean_speedup_vs_eager=_geomean([e for e in eager if e is not None]),
        fraction_beating_baseline=sum(s > 1.0 for s in valid) / n if n else 0.0,
        fraction_over_2x=sum(s > 2.0 for s in valid) / n if n else 0.0,
        median_sol_score=statistics.median(scores) if scores else None,
        mean_sol_score=statistics.fmean(scores) if scores else None,
    )


def aggregate(scores: Sequence[WorkloadScore]) -> Aggregate:
    """Aggregate per-workload scores, each workload one item."""
    return _summarise(
        [s.speedup_vs_baseline for s in scores],
        [s.speedup_vs_eager for s in scores],
        [s.sol_score for s in scores],
        sum(s.flag is ScoreFlag.faster_than_sol for s in scores),
    )


def aggregate_by_problem(scores: Mapping[str, Sequence[WorkloadScore]]) -> Aggregate:
    """Each problem one item: its geomean speedup over its workloads (None if any failed or was flagged,
    since the problem is then not solved) and its mean SOL score."""
    speedups: list[float | None] = []
    eager: list[float | None] = []
    sol: list[float] = []
    flagged = 0
    for per_workload in scores.values():
        if not per_workload:
            continue
        agg = aggregate(per_workload)
        solved = agg.n_rewarded == agg.n
        speedups.append(agg.geomean_speedup if solved else None)
        eager.append(agg.geomean_speedup_vs_eager if solved else None)
        sol.append(agg.mean_sol_score or 0.0)
        flagged += agg.n_faster_than_sol > 0
    return _summarise(speedups, eager, sol, flagged)
