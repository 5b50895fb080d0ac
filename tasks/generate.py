"""generate: ask the agent for the next candidate, given the feedback of earlier attempts."""

from __future__ import annotations

import time
from typing import Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from agents.base import AttemptFeedback, BudgetExhausted
from sol_bench.problem import load_problem
from solforge.agent_spec import AgentSpec

from .common import Generated, Scored, transient


def _history(items: Sequence[AttemptFeedback | Scored | None]) -> list[AttemptFeedback]:
    out = []
    for h in items:
        fb = h.feedback if isinstance(h, Scored) else h
        if fb is not None:
            out.append(fb)
    return out


@task(name="generate", retries=2, retry_delay_seconds=5, retry_condition_fn=transient, cache_policy=NO_CACHE)
def generate(
    agent: AgentSpec, problem_dir: str, history: list[AttemptFeedback | Scored | None], device: str
) -> Generated:
    problem = load_problem(problem_dir)
    t0 = time.monotonic()
    try:
        cand = agent.build(device).propose(problem, _history(history), device)
    except BudgetExhausted as e:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason=f"budget: {e}")
    if cand is None:
        return Generated(candidate=None, seconds=time.monotonic() - t0, stop_reason="agent has nothing more to try")
    return Generated(candidate=cand, seconds=time.monotonic() - t0)
