"""The LLM planner: its answer is validated, and any unusable answer falls back to the given planner."""

from __future__ import annotations

import json

import pytest

from agents.base import Allocation, ProblemStats
from agents.llm_client import ProviderError, Reply
from agents.llm_planner import LLMPlanner, UnusableAllocation, parse_allocation, planner_prompt

STATS = [
    ProblemStats("rms", attempts=4, best_sol_score=0.9, best_speedup_vs_baseline=2.0, recent_gain=0.0,
                 failure_streak=0, cost_usd=0.1, gpu_minutes=1.0),
    ProblemStats("gemm", attempts=2, best_sol_score=0.3, best_speedup_vs_baseline=0.8, recent_gain=0.1,
                 failure_streak=1, cost_usd=0.2, gpu_minutes=2.0),
]  # fmt: skip


class Scripted:
    def __init__(self, answer):
        self.answer = answer
        self.prompts = []

    def complete(self, turns, *, max_output_tokens=None):
        self.prompts.append(turns[-1].content)
        if isinstance(self.answer, Exception):
            raise self.answer
        return Reply(self.answer, 10, 10, None, 1)


class Even:
    def allocate(self, stats, slots):
        return Allocation({s.problem: slots // len(stats) for s in stats}, {"rms": "rules"})


def block(obj) -> str:
    return "Here is my plan.\n```json\n" + json.dumps(obj) + "\n```"


def test_valid_answer_is_used():
    client = Scripted(block({"attempts": {"gemm": 6, "rms": 1}, "reasons": {"gemm": "headroom"}, "stopped": []}))
    planner = LLMPlanner(client, Even())
    alloc = planner.allocate(STATS, 8)
    assert alloc.attempts == {"gemm": 6, "rms": 1} and alloc.reasons["gemm"] == "headroom"
    assert planner.last_error is None
    assert '"best_sol_score": 0.3' in client.prompts[0] and "8 attempt slots" in client.prompts[0]


@pytest.mark.parametrize(
    "answer, why",
    [
        ("no json here", "no JSON allocation"),
        (block({"attempts": {"gemm": 9}}), "sum to 9 > 8"),
        (block({"attempts": {"gemm": -1}}), "non-negative integer"),
        (block({"attempts": {"gemm": 2.5}}), "non-negative integer"),
        (block({"attempts": {"attention": 1}}), "unknown problem 'attention'"),
        (block({"attempts": {"gemm": 1}, "stopped": ["nope"]}), "unknown problem"),
        (block(["gemm"]), "no 'attempts' mapping"),
        (ProviderError("RateLimitError after 5 requests", 5), "RateLimitError"),
    ],
)
def test_unusable_answer_falls_back(answer, why):
    planner = LLMPlanner(Scripted(answer), Even())
    alloc = planner.allocate(STATS, 8)
    assert alloc.attempts == {"rms": 4, "gemm": 4}
    assert why in planner.last_error


def test_parse_allocation_rejects_bool_counts():
    with pytest.raises(UnusableAllocation):
        parse_allocation(block({"attempts": {"gemm": True}}), STATS, 8)


def test_prompt_is_a_file_with_the_stats():
    text = planner_prompt(STATS, 3)
    assert "3 attempt slots" in text and '"problem": "rms"' in text
