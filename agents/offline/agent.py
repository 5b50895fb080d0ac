"""The offline agent: walks a ranked list of template and reference-derived candidates, no network.

Order on a GPU: template kernels (CUDA C++, then Triton, then PyTorch) for every family the reference
matches, with their parameter grids; then the torch.compile variants; the eager reference last. On the
CPU only pytorch-language candidates are made and the eager reference comes first, as a sure pass.
A group (family × language × binding) whose first variant failed to build or crashed is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

from sol_bench.models import Solution
from sol_bench.problem import Problem

from ..base import AttemptFeedback, Candidate
from . import compiled
from .graph import trace_ops
from .templates import FAMILIES, build_solution

GPU_LANGUAGE_ORDER = ("cuda_cpp", "triton", "pytorch")
_BROKEN = {"COMPILE_ERROR", "RUNTIME_ERROR"}


@dataclass(frozen=True)
class Planned:
    solution: Solution
    group: str
    notes: str


def _is_gpu(device: str) -> bool:
    return device.startswith("cuda")


def plan(problem: Problem, device: str, language: str | None = None) -> Iterator[Planned]:
    """Every candidate for ``problem`` on ``device``, best bet first (lazily rendered)."""
    gpu = _is_gpu(device)
    sig = trace_ops(problem)
    langs = GPU_LANGUAGE_ORDER if gpu else ("pytorch",)
    if language is not None:
        langs = tuple(lang for lang in langs if lang == language)
    want_reference = language in (None, "pytorch")
    if want_reference and not gpu:
        yield Planned(compiled.solution(problem, compiled.EAGER), "reference/eager", "the reference, eager")
    bound = [(fam, b) for fam in FAMILIES for b in fam.match(problem, sig)]
    for lang in langs:
        for i, (fam, binding) in enumerate(bound):
            for r in fam.renderers:
                if r.language != lang or (r.needs_gpu and not gpu):
                    continue
                for params in r.variants():
                    sol = build_solution(problem, fam.name, r, binding, params)
                    yield Planned(sol, f"{fam.name}/{lang}/{i}", f"template {fam.name} ({lang}) {params}; ops: {sig}")
    if want_reference and gpu:
        for v in compiled.ordered_variants(problem):
            yield Planned(compiled.solution(problem, v), f"reference/{v.name}", f"torch.compile: {v.name}")
        yield Planned(compiled.solution(problem, compiled.EAGER), "reference/eager", "the reference, eager")


@dataclass
class OfflineAgent:
    """Deterministic candidates from templates and the reference. State: what it proposed, per problem."""

    language: str | None = None
    max_candidates: int = 64
    _proposed: dict[str, list[str]] = field(default_factory=dict)
    _groups: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "offline" + (f":{self.language}" if self.language else "")

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate | None:
        done = self._proposed.setdefault(problem.name, [])
        if len(done) >= self.max_candidates:
            return None
        broken = {
            self._groups[a.solution.name]
            for a in history
            if a.solution.name in self._groups and any(w.status in _BROKEN for w in a.workloads)
        }
        seen = set(done) | {a.solution.name for a in history}
        for p in plan(problem, device, self.language):
            if p.solution.name in seen or p.group in broken:
                continue
            done.append(p.solution.name)
            self._groups[p.solution.name] = p.group
            lang = p.solution.spec.languages[0].value
            return Candidate(solution=p.solution, agent=self.name, language=lang, notes=p.notes)
        return None
