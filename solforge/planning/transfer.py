"""Transfer of winners across problems: what earlier runs measured on *other* problems of a similar size,
handed to the agent so that the variant which won on its kin is planned first.

A template variant is named ``<problem>__<family>_<language>_<params>``; the part after ``__`` (its variant
key) is the same on every problem the template binds to, so measurements of one key on different problems
are comparable. The agent decides which keys compete (those of one template group in its plan) and counts
on how many kin problems each was the fastest (``agents/offline/transfer.py``).

Kin are chosen by the judged device kind and by size class: sixteenfold buckets of the median workload's
input bytes, since the best launch shape of a small problem is rarely that of a large one. Where no problem
of the same class was measured, kin of every class count (a weaker prior beats plan order fitted on one
problem).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from agents.offline.transfer import variant_key
from sol_bench.errors import SolBenchError
from sol_bench.problem import Problem, load_problem

from ..store.transfer_queries import JudgedCandidate, judged_candidates

CLASS_BASE = 16.0


def size_class(problem: Problem) -> int:
    """The problem's sixteenfold bucket of its median workload's input bytes."""
    sizes = sorted(problem.workload_bytes(w) for w in problem.workloads)
    median = max(1, sizes[len(sizes) // 2]) if sizes else 1
    return int(math.log(median, CLASS_BASE))


@dataclass
class KinTable:
    """Per device kind and problem: the latency of every variant key measured there, and the problem's class."""

    measured: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)  # kind -> problem -> key
    classes: dict[str, int | None] = field(default_factory=dict)  # problem -> size class (None: unreadable)

    @classmethod
    def from_judged(cls, rows: Sequence[JudgedCandidate]) -> "KinTable":
        table = cls()
        for r in rows:
            key = variant_key(r.solution_name or "")
            if key is None:
                continue
            per_key = table.measured.setdefault(r.device_kind, {}).setdefault(r.problem, {})
            latency = r.latency_ms if r.passed and r.latency_ms else None
            old = per_key.get(key)
            per_key[key] = latency if old is None else (old if latency is None else min(old, latency))
            if r.problem not in table.classes:
                table.classes[r.problem] = _class_of(r.problem_path)
        return table

    @classmethod
    def from_store(cls, data_dir: Path | str) -> "KinTable":
        return cls.from_judged(judged_candidates(data_dir))

    def kin(self, problem: Problem, device: str) -> dict[str, dict[str, float | None]]:
        """What other problems of ``problem``'s size class measured on ``device``'s kind (every class when
        none of its own was measured)."""
        measured = {p: keys for p, keys in self.measured.get(_kind(device), {}).items() if p != problem.name}
        own = size_class(problem)
        same = {p: dict(keys) for p, keys in measured.items() if self.classes.get(p) == own}
        return same or {p: dict(keys) for p, keys in measured.items()}


def _kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def _class_of(path: str | None) -> int | None:
    if not path or not Path(path).is_dir():
        return None
    try:
        return size_class(load_problem(path))
    except (SolBenchError, OSError, ValueError):
        return None

