"""The contracts between agents and the pipeline.

An agent proposes a candidate ``Solution`` for a problem, given the feedback of earlier attempts (the
planner's types are in ``solforge.planning.types``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from sol_bench.models import Solution
from sol_bench.problem import Problem


@dataclass(frozen=True)
class WorkloadFeedback:
    """What the judge said about one workload of an earlier attempt, trimmed for a prompt."""

    workload_uuid: str
    status: str
    reason: str | None = None
    log_excerpt: str = ""
    latency_ms: float | None = None
    t_b_ms: float | None = None  # the optimized PyTorch baseline's latency
    t_sol_ms: float | None = None  # the speed-of-light time
    sol_score: float | None = None  # 0.5 at the baseline's latency, 1.0 at the speed of light
    max_abs_error: float | None = None


@dataclass(frozen=True)
class AttemptFeedback:
    """One earlier attempt of this agent on this problem and its verdicts."""

    candidate_id: str
    solution: Solution
    workloads: tuple[WorkloadFeedback, ...]

    @property
    def passed(self) -> bool:
        return bool(self.workloads) and all(w.status == "PASSED" for w in self.workloads)


@dataclass(frozen=True)
class Candidate:
    """A proposed solution with the cost of producing it."""

    solution: Solution
    agent: str
    language: str
    model: str | None = None  # the LLM that wrote it; None for an agent without one
    parent_id: str | None = None  # the earlier attempt it built on
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    notes: str = ""


class BudgetExhausted(Exception):
    """The agent may not spend more (tokens, money or time)."""


class ProposalFailed(Exception):
    """The agent spent effort but produced no usable candidate (malformed reply, provider failure).

    The pipeline records it as a failed attempt with its cost; the agent itself remembers the reason and
    tells its model on the next turn.
    """

    def __init__(
        self,
        reason: str,
        *,
        agent: str,
        language: str,
        model: str | None = None,
        parent_id: str | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
    ):
        super().__init__(reason)
        self.reason = reason
        self.agent = agent
        self.language = language
        self.model = model
        self.parent_id = parent_id
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
        self.cost_usd = cost_usd


class Agent(Protocol):
    name: str

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate | None:
        """Return the next candidate, or None when this agent has nothing more to try."""
        ...
