"""The problem's own reference as a PyTorch solution: the eager baseline, and an agent that proposes it.

The reference agent needs no model and no network; it is what ``--agent reference`` runs and what the
baseline flow judges to measure T_b (eager).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from agents.base import AttemptFeedback, Candidate
from sol_bench.models import BuildSpec, Definition, Language, SourceFile, Solution
from sol_bench.problem import Problem


def reference_solution(definition: Definition, name: str | None = None) -> Solution:
    return Solution(
        name=name or f"{definition.name}__reference",
        definition=definition.name,
        author="solforge-reference",
        description="The problem's PyTorch reference, unchanged (eager baseline).",
        spec=BuildSpec(
            languages=[Language.pytorch], entry_point="kernel.py::run", destination_passing_style=False
        ),
        sources=[SourceFile(path="kernel.py", content=definition.reference)],
    )


@dataclass
class ReferenceAgent:
    """Proposes the reference itself, up to ``repeats`` times (enough to exercise the pipeline)."""

    name: str = "reference"
    repeats: int = 1_000_000

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate | None:
        if len(history) >= self.repeats:
            return None
        sol = reference_solution(problem.definition, name=f"{problem.name}__reference_{len(history)}")
        return Candidate(solution=sol, agent=self.name, language="pytorch")
