"""The solution of a candidate made from the problem's reference (compiled, exported, or with subgraphs
replaced): ``kernel.py`` holds the code and the ``solforge_entry`` the judge calls, next to any shipped files."""

from __future__ import annotations

from typing import Mapping

from sol_bench.models import Solution
from sol_bench.problem import Problem

ENTRY_POINT = "kernel.py::solforge_entry"


def entry_solution(
    problem: Problem, *, name: str, author: str, description: str, language: str, destination_passing: bool,
    kernel: str, files: Mapping[str, str] | None = None,
) -> Solution:
    """``kernel``: the text of ``kernel.py``; ``files``: path -> text of the other sources."""
    sources = [{"path": "kernel.py", "content": kernel}, *({"path": p, "content": t} for p, t in (files or {}).items())]
    return Solution.model_validate({
        "name": name,
        "definition": problem.name,
        "author": author,
        "description": description,
        "spec": {"languages": [language], "entry_point": ENTRY_POINT, "destination_passing_style": destination_passing},
        "sources": sources,
    })  # fmt: skip
