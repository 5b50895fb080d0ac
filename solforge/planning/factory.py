"""The planner a run asked for: the rules, or an LLM that falls back to them."""

from __future__ import annotations

from typing import Literal

from .rules import RulePlanner
from .types import Planner

PlannerKind = Literal["rules", "llm"]


def make_planner(kind: PlannerKind, model: str | None = None, api_base: str | None = None) -> Planner:
    """``kind`` 'llm' needs a litellm model string; raises ValueError naming what is missing."""
    if kind == "rules":
        return RulePlanner()
    if kind == "llm":
        if not model:
            raise ValueError("planner 'llm' needs a model (--planner-model, or --model of the agents)")
        from agents.llm_client import LiteLLMClient, LLMConfig

        from .llm import LLMPlanner

        return LLMPlanner(LiteLLMClient(LLMConfig(model=model, api_base=api_base)), fallback=RulePlanner())
    raise ValueError(f"unknown planner {kind!r} (known: rules, llm)")
