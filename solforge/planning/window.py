"""Which problem gets the next attempt: a rolling window over the planner's current allocation.

The campaign keeps two attempts per device slot in flight (one judged, one built and waiting for the
slot) and submits the next one as soon as a verdict arrives, instead of waiting for a whole round.
Attempts of one problem stay sequential: a problem with nothing in flight is preferred; otherwise its
next attempt is chained behind the one in flight (its ``prepare`` waits for that verdict), at most
``max_chain`` deep. When no problem that could take a free slot has budget left, the planner runs again
(only after a verdict since its last run: the stats would be the same).
Pure bookkeeping, no Prefect: tested in tests/test_scheduling.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Window:
    size: int  # attempts in flight at most (submitted, verdict not yet stored)
    max_chain: int = 2  # attempts of one problem in flight at most
    budget: dict[str, int] = field(default_factory=dict)  # attempts left in the current allocation
    in_flight: dict[str, int] = field(default_factory=dict)
    judged_since_plan: dict[str, int] = field(default_factory=dict)
    exhausted: set[str] = field(default_factory=set)  # the agent had nothing more to try
    planned: bool = False

    def busy(self) -> int:
        return sum(self.in_flight.values())

    def has_room(self) -> bool:
        return self.busy() < self.size

    def next_problem(self) -> str | None:
        """The problem to submit to now, or None (plan again, or wait for a verdict)."""
        ready = [p for p, n in self.budget.items() if n > 0 and p not in self.exhausted]
        if not ready:
            return None
        idle = [p for p in ready if self.in_flight.get(p, 0) == 0]
        if idle:
            return min(idle, key=lambda p: (-self.budget[p], p))
        chain = [p for p in ready if self.in_flight.get(p, 0) < self.max_chain]
        return min(chain, key=lambda p: (self.in_flight.get(p, 0), -self.budget[p], p)) if chain else None

    def should_plan(self) -> bool:
        """Plan again when no problem without an attempt in flight has budget, and a verdict came since."""
        if not self.planned:
            return True
        idle_budget = any(
            n > 0 and p not in self.exhausted and self.in_flight.get(p, 0) == 0 for p, n in self.budget.items()
        )
        return not idle_budget and sum(self.judged_since_plan.values()) > 0

    def submitted(self, problem: str) -> None:
        self.budget[problem] = self.budget.get(problem, 0) - 1
        self.in_flight[problem] = self.in_flight.get(problem, 0) + 1

    def judged(self, problem: str) -> None:
        self.in_flight[problem] -= 1
        self.judged_since_plan[problem] = self.judged_since_plan.get(problem, 0) + 1

    def new_plan(self, attempts: dict[str, int]) -> None:
        """Replace the budget with a new allocation (read ``judged_since_plan`` before)."""
        self.judged_since_plan = {}
        self.budget = {p: n for p, n in attempts.items() if p not in self.exhausted}
        self.planned = True
