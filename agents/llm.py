"""An LLM kernel worker: follows protocol.md, sees its earlier attempts' verdicts, proposes the next one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from sol_bench.problem import Problem

from .base import AttemptFeedback, Candidate, ProposalFailed
from .budget import AgentBudget, BudgetMeter
from .llm_client import ChatClient, LiteLLMClient, LLMConfig, ProviderError
from .prompts import conversation
from .reply import MalformedReply, parse_solution


@dataclass
class LLMAgent:
    """One model writing one language. State: spend so far and the last unusable reply per problem."""

    config: LLMConfig
    language: str
    hardware: str = "H200"
    meter: BudgetMeter = field(default_factory=lambda: BudgetMeter(AgentBudget()))
    client: ChatClient | None = None
    _pending: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.client is None:
            self.client = LiteLLMClient(self.config)

    @property
    def name(self) -> str:
        return f"llm:{self.config.model}:{self.language}"

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate:
        self.meter.check()
        parent = history[-1].candidate_id if history else None
        turns = conversation(
            problem, history, language=self.language, hardware=self.hardware,
            pending_failure=self._pending.get(problem.name),
        )  # fmt: skip
        left = self.meter.tokens_left()
        cap = min(self.config.max_output_tokens, left) if left is not None else None
        assert self.client is not None
        try:
            reply = self.client.complete(turns, max_output_tokens=cap)
        except ProviderError as e:
            self.meter.record(calls=e.attempts)
            raise self._failed(f"model provider failed: {e}", parent) from e
        cost = reply.cost_usd or 0.0
        self.meter.record(calls=reply.attempts, tokens=reply.tokens_in + reply.tokens_out, usd=cost)
        spent = {"tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out, "cost_usd": cost}
        try:
            solution = parse_solution(
                reply.text, definition=problem.name, language=self.language, author=self.config.model
            )
        except MalformedReply as e:
            self._pending[problem.name] = str(e)
            raise self._failed(f"malformed reply: {e}", parent, **spent) from e
        self._pending.pop(problem.name, None)
        return Candidate(
            solution=solution, agent=self.name, language=self.language, model=self.config.model,
            parent_id=parent, notes=solution.description or "", **spent,
        )  # fmt: skip

    def _failed(self, reason: str, parent: str | None, **spent: float) -> ProposalFailed:
        return ProposalFailed(
            reason, agent=self.name, language=self.language, model=self.config.model, parent_id=parent,
            **spent,  # type: ignore[arg-type]
        )  # fmt: skip
