"""The offline agent: template and reference-derived candidates, no network, ordered by measurement.

The plan (best bet first) on a GPU: template kernels (CUDA C++, then Triton; PyTorch only when asked) for every
family the reference matches, with their parameter grids; then the torch.compile variants; the eager
reference last. On the CPU only pytorch-language candidates are made and the eager reference comes first,
as a sure pass. ``search.SearchPolicy`` picks from the plan with the judge's latencies: each template
group's first variant, then grid neighbours of the fastest passing variants, then the reference-derived
groups; it drops broken or clearly slower groups (family × language × binding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from sol_bench.models import Solution
from sol_bench.problem import Problem

from ..base import AttemptFeedback, Candidate
from . import compiled
from .graph import trace_ops
from .search import Option, SearchPolicy, verdict
from .templates import FAMILIES, build_solution
from .templates.probe import Probe

GPU_LANGUAGE_ORDER = ("cuda_cpp", "triton", "pytorch")
# With no language asked for on a GPU, PyTorch-language templates are left out: the reference-derived
# candidates (torch.compile variants, eager) already cover PyTorch there, and measured faster.
GPU_LANGUAGE_AUTO = ("cuda_cpp", "triton")


@dataclass(frozen=True)
class Planned:
    solution: Solution
    group: str
    notes: str
    params: Mapping[str, Any] = field(default_factory=dict)


def _is_gpu(device: str) -> bool:
    return device.startswith("cuda")


def plan(problem: Problem, device: str, language: str | None = None, probe: Probe | None = None) -> Iterator[Planned]:
    """Every candidate for ``problem`` on ``device``, best bet first (lazily rendered).

    ``probe``: the problem's reference outputs on the CPU, which every family's bindings are checked
    against; pass one to share it between plans of the same problem.
    """
    gpu = _is_gpu(device)
    probe = probe if probe is not None else Probe(problem)
    sig = trace_ops(problem)
    langs = GPU_LANGUAGE_AUTO if gpu else ("pytorch",)
    if language is not None:
        langs = tuple(lang for lang in (GPU_LANGUAGE_ORDER if gpu else langs) if lang == language)
    want_reference = language in (None, "pytorch")
    if want_reference and not gpu:
        yield Planned(compiled.solution(problem, compiled.EAGER), "reference/eager", "the reference, eager")
    bound = [(fam, b) for fam in FAMILIES for b in fam.match(problem, sig, probe)]
    for lang in langs:
        for i, (fam, binding) in enumerate(bound):
            for r in fam.renderers:
                if r.language != lang or (r.needs_gpu and not gpu) or not r.accepts(binding):
                    continue
                for params in r.variants():
                    sol = build_solution(problem, fam.name, r, binding, params)
                    notes = f"template {fam.name} ({lang}) {params}; ops: {sig}"
                    yield Planned(sol, f"{fam.name}/{lang}/{i}", notes, params)
    if want_reference and gpu:
        for v in compiled.ordered_variants(problem):
            yield Planned(compiled.solution(problem, v), f"reference/{v.name}", f"torch.compile: {v.name}")
        yield Planned(compiled.solution(problem, compiled.EAGER), "reference/eager", "the reference, eager")


@dataclass
class OfflineAgent:
    """Deterministic candidates from templates and the reference. State: its plan and proposals, per problem."""

    language: str | None = None
    max_candidates: int = 64
    policy: SearchPolicy = field(default_factory=SearchPolicy)
    _proposed: dict[str, list[str]] = field(default_factory=dict)
    _plans: dict[tuple[str, str], list[Planned]] = field(default_factory=dict)
    _probes: dict[str, Probe] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "offline" + (f":{self.language}" if self.language else "")

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate | None:
        done = self._proposed.setdefault(problem.name, [])
        if len(done) >= self.max_candidates:
            return None
        key = (problem.name, "gpu" if _is_gpu(device) else "cpu")
        if key not in self._plans:  # matching probes the reference on the CPU: once per problem
            probe = self._probes.setdefault(problem.name, Probe(problem))
            self._plans[key] = list(plan(problem, device, self.language, probe))
        planned = self._plans[key]
        options = [Option(p.solution.name, p.group, p.params) for p in planned]
        verdicts = {a.solution.name: verdict(a) for a in history}
        pick = self.policy.next(options, set(done), verdicts)
        if pick is None:
            return None
        p = next(p for p in planned if p.solution.name == pick.name)
        done.append(p.solution.name)
        lang = p.solution.spec.languages[0].value
        return Candidate(solution=p.solution, agent=self.name, language=lang, notes=p.notes)
