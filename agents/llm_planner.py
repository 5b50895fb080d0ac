"""A planner that asks an LLM for the next round's allocation, checks it, and falls back to rules."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from string import Template
from typing import Sequence

from .base import Allocation, Planner, ProblemStats
from .llm_client import ChatClient, ProviderError
from .prompts import Turn
from .reply import MalformedReply, extract_json_block

PROMPT = Path(__file__).parent / "prompts" / "planner.md"
log = logging.getLogger(__name__)


class UnusableAllocation(ValueError):
    """The model's allocation breaks a rule; the message says which."""


def planner_prompt(stats: Sequence[ProblemStats], slots: int) -> str:
    rows = [asdict(s) for s in stats]
    return Template(PROMPT.read_text()).substitute(slots=slots, stats=json.dumps(rows, indent=1))


def parse_allocation(text: str, stats: Sequence[ProblemStats], slots: int) -> Allocation:
    """The allocation in a reply, validated: known problems only, non-negative integers, sum <= slots."""
    try:
        data = json.loads(extract_json_block(text))
    except (MalformedReply, json.JSONDecodeError) as e:
        raise UnusableAllocation(f"no JSON allocation: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("attempts"), dict):
        raise UnusableAllocation("the object has no 'attempts' mapping")
    known = {s.problem for s in stats}
    attempts: dict[str, int] = {}
    for name, n in data["attempts"].items():
        if name not in known:
            raise UnusableAllocation(f"unknown problem {name!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UnusableAllocation(f"attempts for {name!r} must be a non-negative integer, got {n!r}")
        attempts[name] = n
    if sum(attempts.values()) > slots:
        raise UnusableAllocation(f"attempts sum to {sum(attempts.values())} > {slots} slots")
    reasons = data.get("reasons") or {}
    stopped = data.get("stopped") or []
    if not isinstance(reasons, dict) or not isinstance(stopped, list):
        raise UnusableAllocation("'reasons' must be a mapping and 'stopped' a list")
    unknown = [p for p in [*reasons, *stopped] if p not in known]
    if unknown:
        raise UnusableAllocation(f"unknown problem(s) {unknown}")
    return Allocation(
        attempts=attempts, reasons={k: str(v) for k, v in reasons.items()}, stopped=tuple(str(p) for p in stopped)
    )


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
        try:
            reply = self.client.complete(turns, max_output_tokens=4096)
            return parse_allocation(reply.text, stats, slots)
        except (ProviderError, UnusableAllocation) as e:
            self.last_error = str(e)
            log.warning("LLM planner answer unusable (%s); using the fallback planner", e)
            return self.fallback.allocate(stats, slots)
