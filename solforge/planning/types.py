"""What the planner reads and what it decides: per-problem statistics in, an allocation of attempts out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class ProblemStats:
    """What the planner knows of one problem after a round."""

    problem: str
    attempts: int
    best_sol_score: float | None
    best_speedup_vs_baseline: float | None
    recent_gain: float  # improvement of best SOL score over the last round(s)
    failure_streak: int
    cost_usd: float
    gpu_minutes: float


@dataclass(frozen=True)
class Allocation:
    """The planner's decision for the next round: attempts per problem, with a reason each.

    ``planner`` names who decided ('rules' or 'llm'); ``fallback`` says why an LLM's answer was not used;
    ``cost_usd`` is what deciding cost (the LLM call, failed or not)."""

    attempts: dict[str, int]
    reasons: dict[str, str] = field(default_factory=dict)
    stopped: tuple[str, ...] = ()
    planner: str = "rules"
    fallback: str | None = None
    cost_usd: float = 0.0


class Planner(Protocol):
    def allocate(self, stats: Sequence[ProblemStats], slots: int) -> Allocation: ...
