"""generate: ask the agent for the next candidate, given the feedback of earlier attempts.

An agent that raises does not end the run: its error becomes a ``Failure`` (stored as a failed attempt
with its reason and cost). Errors a second try can fix (``common.transient``) are retried first.
"""

from __future__ import annotations

import time
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


def failed(stage: str, e: BaseException, seconds: float) -> Generated:
    """An attempt whose ``stage`` raised ``e``."""
    if isinstance(e, ProposalFailed):
        failure = Failure(stage, describe(e), final=False, agent=e.agent, tokens_in=e.tokens_in,
                          tokens_out=e.tokens_out, cost_usd=e.cost_usd)  # fmt: skip
    else:
        failure = Failure(stage, describe(e))
    return Generated(candidate=None, seconds=seconds, stop_reason=f"{stage} failed: {failure.reason}", failure=failure)


@task(name="generate", retries=2, retry_delay_seconds=5, retry_condition_fn=transient, cache_policy=NO_CACHE)
def generate(
    agent: AgentSpec, problem_dir: str, history: list[AttemptFeedback | Scored | None], device: str
) -> Generated:
    t0 = time.monotonic()
    try:
        problem = load_problem(problem_dir)
        cand = agent.build(device).propose(problem, _history(history), device)
    except BudgetExhausted as e:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason=f"budget: {e}")
    except TRANSIENT:
        raise  # retried by the task; the caller (``flows.optimize.prepare``) records it if it persists
    except Exception as e:  # noqa: BLE001 - one problem's planning error must not end the run
        return failed("generate", e, time.monotonic() - t0)
    if cand is None:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason="agent has nothing more to try")
    return Generated(candidate=cand, seconds=time.monotonic() - t0)
