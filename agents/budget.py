"""Spending limits of an agent (calls, tokens, USD) and the meter that enforces them."""

from __future__ import annotations

from dataclasses import dataclass

from .base import BudgetExhausted


@dataclass(frozen=True)
class AgentBudget:
    """Upper limits on what an agent may spend; None means no limit."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None


@dataclass
class BudgetMeter:
    """What has been spent against one budget. Share one meter between agents to pool a budget."""

    budget: AgentBudget
    calls: int = 0
    tokens: int = 0
    usd: float = 0.0

    def exhausted_reason(self) -> str | None:
        b = self.budget
        if b.max_calls is not None and self.calls >= b.max_calls:
            return f"call budget spent ({self.calls}/{b.max_calls} calls)"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"token budget spent ({self.tokens}/{b.max_tokens} tokens)"
        if b.max_usd is not None and self.usd >= b.max_usd:
            return f"money budget spent (${self.usd:.4f}/${b.max_usd:.4f})"
        return None

    def check(self) -> None:
        """Raise BudgetExhausted if another call may not be made."""
        reason = self.exhausted_reason()
        if reason:
            raise BudgetExhausted(reason)

    def tokens_left(self) -> int | None:
        if self.budget.max_tokens is None:
            return None
        return max(0, self.budget.max_tokens - self.tokens)

    def record(self, *, calls: int = 0, tokens: int = 0, usd: float = 0.0) -> None:
        self.calls += calls
        self.tokens += tokens
        self.usd += usd
