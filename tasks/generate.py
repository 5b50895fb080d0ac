"""generate: ask the agent for the next candidate, given the feedback of earlier attempts.

An agent that raises does not end the run: its error becomes a ``Failure`` (stored as a failed attempt
with its reason and cost). Errors a second try can fix (``common.transient``) are retried first. Every
attempt records its parent: the agent's choice, else the best passing attempt it was shown.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from agents.base import AttemptFeedback, BudgetExhausted, ProposalFailed
from sol_bench.problem import load_problem
from solforge.agent_spec import AgentSpec

from .common import Failure, Generated, Scored, transient

TRANSIENT = (ConnectionError, TimeoutError, OSError)  # what ``common.transient`` retries


def _history(items: Sequence[AttemptFeedback | Scored | None]) -> list[AttemptFeedback]:
    out = []
    for h in items:
        fb = h.feedback if isinstance(h, Scored) else h
        if fb is not None:
            out.append(fb)
    return out


def describe(e: BaseException) -> str:
    """One line naming the error, for a failure row."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:500]}" if text else type(e).__name__


def default_parent(history: Sequence[AttemptFeedback]) -> str | None:
    """The attempt a new one builds on when its agent names none: the best passing attempt so far (highest
    mean SOL score, then lowest mean latency), else the latest one."""
    passing = [a for a in history if a.passed]
    if not passing:
        return history[-1].candidate_id if history else None

    def rank(a: AttemptFeedback) -> tuple[float, float]:
        scores = [w.sol_score for w in a.workloads if w.sol_score is not None]
        latencies = [w.latency_ms for w in a.workloads if w.latency_ms is not None]
        mean = sum(scores) / len(scores) if scores else 0.0
        return mean, -(sum(latencies) / len(latencies) if latencies else float("inf"))

    return max(passing, key=rank).candidate_id


def failed(stage: str, e: BaseException, seconds: float, parent_id: str | None = None) -> Generated:
    """An attempt whose ``stage`` raised ``e``."""
    if isinstance(e, ProposalFailed):
        failure = Failure(stage, describe(e), final=False, agent=e.agent, parent_id=e.parent_id or parent_id,
                          tokens_in=e.tokens_in, tokens_out=e.tokens_out, cost_usd=e.cost_usd)  # fmt: skip
    else:
        failure = Failure(stage, describe(e), parent_id=parent_id)
    return Generated(candidate=None, seconds=seconds, stop_reason=f"{stage} failed: {failure.reason}", failure=failure)


@task(name="generate", retries=2, retry_delay_seconds=5, retry_condition_fn=transient, cache_policy=NO_CACHE)
def generate(
    agent: AgentSpec, problem_dir: str, history: list[AttemptFeedback | Scored | None], device: str
) -> Generated:
    t0 = time.monotonic()
    seen = _history(history)
    parent = default_parent(seen)
    try:
        problem = load_problem(problem_dir)
        cand = agent.build(device).propose(problem, seen, device)
    except BudgetExhausted as e:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason=f"budget: {e}")
    except TRANSIENT:
        raise  # retried by the task; the caller (``flows.optimize.prepare``) records it if it persists
    except Exception as e:  # noqa: BLE001 - one problem's planning error must not end the run
        return failed("generate", e, time.monotonic() - t0, parent)
    if cand is None:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason="agent has nothing more to try")
    if cand.parent_id is None and parent is not None:
        cand = replace(cand, parent_id=parent)
    return Generated(candidate=cand, seconds=time.monotonic() - t0)
