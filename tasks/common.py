"""Records passed between the pipeline's tasks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.base import AttemptFeedback, Candidate
from sol_bench.models import Solution
from solforge.judge_client import JudgeRun


@dataclass(frozen=True)
class Failure:
    """Why an attempt made no candidate because something raised (not because the agent had nothing more).

    ``final``: the agent cannot go on with this problem (an unexpected error; asking again would fail the
    same way); a ``ProposalFailed`` is not final: the agent tells its model why on the next turn.
    """

    stage: str  # generate | compile
    reason: str
    final: bool = True
    agent: str | None = None
    parent_id: str | None = None  # the earlier attempt it built on
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Generated:
    """What generate produced: a candidate, or None with the reason the agent stopped or failed."""

    candidate: Candidate | None
    seconds: float
    stop_reason: str | None = None
    failure: Failure | None = None


@dataclass(frozen=True)
class Compiled:
    solution: Solution
    source_hash: str
    error: str | None = None  # a build error found before any device time is spent
    seconds: float = 0.0


@dataclass(frozen=True)
class Prepared:
    """generate and compile of one attempt, from one CPU-worker submission."""

    generated: Generated
    compiled: Compiled | None


@dataclass(frozen=True)
class Scored:
    candidate_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    feedback: AttemptFeedback | None = None
    judge: JudgeRun | None = None
    error: str | None = None  # the judge itself failed (after its retry): no verdict, the candidate's fault or not


def transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry only errors a second try can fix (network, filesystem hiccups), never a verdict."""
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, (ConnectionError, TimeoutError, OSError))
