"""A rule-based planner: spend the next round's attempts where the headroom is.

A round is one run of the planner; the campaign runs it again whenever its allocation cannot fill a free
device slot (solforge/planning/window.py), so "the last round's gain" is the gain of the attempts judged since the
previous run (a problem with none judged since keeps its previous gain).

Rules, in order, per problem:
1. stop when the best SOL score is within ``done_at`` of 1 (nothing left to gain);
2. stop after ``max_failure_streak`` failed attempts in a row;
3. stop on a plateau: a passing best, at least ``plateau_attempts`` attempts, and a last-round gain
   below ``min_gain``;
4. every other problem gets a weight ``headroom x (1 + progress) / (1 + cost)`` where headroom is
   1 - best SOL score (1 with no score yet), progress the last round's gain scaled by ``progress_boost``
   and cost its spend in USD scaled by ``cost_weight``; failures in a row halve the weight each.
Slots go out by largest remainder, at least one per live problem while slots last (highest weight first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .types import Allocation, ProblemStats


@dataclass(frozen=True)
class RulePlanner:
    done_at: float = 0.98
    max_failure_streak: int = 4
    plateau_attempts: int = 3
    min_gain: float = 0.005
    progress_boost: float = 5.0
    cost_weight: float = 1.0

    def weight(self, s: ProblemStats) -> float:
        headroom = 1.0 if s.best_sol_score is None else max(0.0, 1.0 - s.best_sol_score)
        progress = max(0.0, s.recent_gain) * self.progress_boost
        return headroom * (1.0 + progress) / (1.0 + self.cost_weight * s.cost_usd) * 0.5**s.failure_streak

    def stop_reason(self, s: ProblemStats) -> str | None:
        if s.best_sol_score is not None and s.best_sol_score >= self.done_at:
            return f"done: best SOL score {s.best_sol_score:.3f} >= {self.done_at}"
        if s.failure_streak >= self.max_failure_streak:
            return f"stopped: {s.failure_streak} failed attempts in a row"
        if (
            s.best_sol_score is not None
            and s.attempts >= self.plateau_attempts
            and s.recent_gain < self.min_gain
        ):
            return f"plateau: gain {s.recent_gain:+.4f} < {self.min_gain} after {s.attempts} attempts"
        return None

    def allocate(self, stats: Sequence[ProblemStats], slots: int) -> Allocation:
        reasons: dict[str, str] = {}
        stopped: list[str] = []
        live: dict[str, float] = {}
        for s in stats:
            why = self.stop_reason(s)
            if why:
                stopped.append(s.problem)
                reasons[s.problem] = why
            else:
                live[s.problem] = self.weight(s)
        attempts = {p: 0 for p in live}
        order = sorted(live, key=lambda p: (-live[p], p))
        remaining = max(0, slots)
        for p in order[:remaining]:
            attempts[p] = 1
        remaining -= min(remaining, len(order))
        total = sum(live.values())
        if remaining and total > 0:
            shares = {p: remaining * live[p] / total for p in order}
            for p in order:
                attempts[p] += int(shares[p])
            left = remaining - sum(int(v) for v in shares.values())
            for p in sorted(order, key=lambda p: (-(shares[p] - int(shares[p])), p))[:left]:
                attempts[p] += 1
        by_name = {s.problem: s for s in stats}
        for p in order:
            s = by_name[p]
            best = "none" if s.best_sol_score is None else f"{s.best_sol_score:.3f}"
            reasons[p] = (
                f"weight {live[p]:.3f}: best SOL {best}, gain {s.recent_gain:+.3f}, "
                f"failure streak {s.failure_streak}, cost ${s.cost_usd:.4f}"
            )
        return Allocation(attempts=attempts, reasons=reasons, stopped=tuple(stopped))
