"""A planner that asks an LLM for the next round's allocation, validates it, and falls back to rules.

The model reads the same statistics the rule planner does (``solforge.store.stats.problem_stats``). Its
answer is a pydantic model checked against those statistics; any unusable answer (provider failure, no
JSON, a broken rule) falls back to the rule planner, and the allocation says why (the campaign stores it
with every decision of that round).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from string import Template
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from agents.llm_client import ChatClient, ProviderError
from agents.prompts import Turn
from agents.reply import MalformedReply, extract_json_block

from .types import Allocation, Planner, ProblemStats

PROMPT = Path(__file__).with_name("prompt.md")
MAX_OUTPUT_TOKENS = 4096
log = logging.getLogger(__name__)


class UnusableAllocation(ValueError):
    """The model's allocation breaks a rule; the message says which."""


class AllocationAnswer(BaseModel):
    """The JSON object the model must answer with."""

    model_config = ConfigDict(extra="ignore")

    attempts: dict[str, StrictInt]
    reasons: dict[str, str] = Field(default_factory=dict)
    stopped: list[str] = Field(default_factory=list)


def planner_prompt(stats: Sequence[ProblemStats], slots: int) -> str:
    rows = [asdict(s) for s in stats]
    return Template(PROMPT.read_text()).substitute(slots=slots, stats=json.dumps(rows, indent=1))


def _first_error(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(root)"
    return f"{where}: {first['msg']}"


def parse_allocation(text: str, stats: Sequence[ProblemStats], slots: int) -> Allocation:
    """The allocation in a reply, validated: known problems only, non-negative integers, sum <= slots."""
    try:
        data = json.loads(extract_json_block(text))
    except (MalformedReply, json.JSONDecodeError) as e:
        raise UnusableAllocation(f"no JSON allocation: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("attempts"), dict):
        raise UnusableAllocation("the object has no 'attempts' mapping")
    try:
        answer = AllocationAnswer.model_validate(data)
    except ValidationError as e:
        raise UnusableAllocation(f"attempts must be non-negative integers per problem ({_first_error(e)})") from None
    known = {s.problem for s in stats}
    for name, n in answer.attempts.items():
        if name not in known:
            raise UnusableAllocation(f"unknown problem {name!r}")
        if n < 0:
            raise UnusableAllocation(f"attempts for {name!r} must be a non-negative integer, got {n!r}")
    if sum(answer.attempts.values()) > slots:
        raise UnusableAllocation(f"attempts sum to {sum(answer.attempts.values())} > {slots} slots")
    unknown = [p for p in [*answer.reasons, *answer.stopped] if p not in known]
    if unknown:
        raise UnusableAllocation(f"unknown problem(s) {unknown}")
    return Allocation(attempts=dict(answer.attempts), reasons=dict(answer.reasons), stopped=tuple(answer.stopped),
                      planner="llm")  # fmt: skip


@dataclass
class LLMPlanner:
    """Planner protocol over a chat model; any failure of the model's answer falls back to ``fallback``."""

    client: ChatClient
    fallback: Planner
    last_error: str | None = None

    def allocate(self, stats: Sequence[ProblemStats], slots: int) -> Allocation:
        self.last_error = None
        if not stats or slots <= 0:
            return self.fallback.allocate(stats, slots)
        turns = [Turn("user", planner_prompt(stats, slots))]
        cost = 0.0
        try:
            reply = self.client.complete(turns, max_output_tokens=MAX_OUTPUT_TOKENS)
            cost = reply.cost_usd or 0.0
            return replace(parse_allocation(reply.text, stats, slots), cost_usd=cost)
        except (ProviderError, UnusableAllocation) as e:
            self.last_error = str(e)
            log.warning("LLM planner answer unusable (%s); using the rule planner", e)
            return replace(self.fallback.allocate(stats, slots), fallback=str(e), cost_usd=cost)
