"""The offline agent: template and reference-derived candidates, no network, ordered by measurement.

The plan (best bet first) on a GPU: the tuned reference (per input signature the fastest of a graph of eager, a
graph of Inductor's code and Inductor's code, timed on its first call, Inductor's kept only within tolerance of
eager: ``tuned.py``), which is both a sure pass and the bar (T_b's ways), then the floor (the reference replayed
as a CUDA graph: eager's numerics, one launch per call), tried only if the tuned reference failed; then, where
families are found inside a larger reference that no template binds whole, the subgraph candidate (those
regions replaced by the families' kernels, the rest by Inductor, one CUDA graph: ``subgraph/``), then template
kernels (CUDA C++, then Triton, then CuTe DSL; PyTorch only when asked) for every family the reference matches,
with their parameter grids, then the subgraph candidate where a template binds; then the reference's Inductor
code exported as source (``export.py``; only where this process has the device), the torch.compile variants,
and the eager reference last. On the CPU only pytorch-language candidates are made: the eager
reference first, as a sure pass, then the tuned reference (eager or Inductor's C++ code, whichever is faster
per input signature: ``tuned.py``), then the templates, then Inductor's C++ code alone (``compiled.CPU_VARIANTS``).
Inductor candidates are checked against the eager reference before they are offered (``precheck.py``, where
this process can run them); those that miss the tolerance are skipped with the reason kept.
``search.SearchPolicy`` picks from the plan with the judge's latencies: the floor while nothing has passed,
each template group's first variant, then the reference's first candidate after them (the bar to clear), then
grid neighbours of the fastest passing variants, then the other reference-derived groups; it drops broken or
clearly slower groups (family × language × binding).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from sol_bench.models import Solution
from sol_bench.problem import Problem

from ..base import AttemptFeedback, Candidate
from . import compiled, export, precheck
from .compiled import CompileVariant
from .graph import trace_ops
from .search import Option, SearchPolicy, verdict
from .subgraph import solution as subgraph_solution
from .transfer import Kin, priors
from .templates import FAMILIES, build_solution
from .templates.probe import Probe

_log = logging.getLogger(__name__)

GPU_LANGUAGE_ORDER = ("cuda_cpp", "triton", "cute_dsl", "pytorch")
# With no language asked for on a GPU, PyTorch-language templates are left out: the reference-derived
# candidates (torch.compile variants, eager) already cover PyTorch there, and measured faster.
GPU_LANGUAGE_AUTO = ("cuda_cpp", "triton", "cute_dsl")


def _writable(language: str) -> bool:
    """Whether candidates in ``language`` can run here: CuTe DSL needs the ``cutlass`` package (the ``gpu``
    extra); without it, unasked, its candidates would only fail."""
    return language != "cute_dsl" or importlib.util.find_spec("cutlass") is not None


@dataclass(frozen=True)
class Planned:
    """One planned candidate. ``make`` renders it; for most it returns a ready solution, for an exported one
    it runs the export on first use (``export.NotExportable`` when the reference does not export)."""

    name: str
    group: str
    notes: str
    make: Callable[[], Solution]
    params: Mapping[str, Any] = field(default_factory=dict)
    floor: bool = False  # the sure pass: proposed while no candidate of the problem has passed
    bar: bool = False  # the reference's best bet (T_b's ways): the time the templates have to beat
    inductor: bool = False  # Inductor's numerics, not eager's: checked against the eager reference first

    @property
    def solution(self) -> Solution:
        return self.make()

    @staticmethod
    def of(
        solution: Solution, group: str, notes: str, params: Mapping[str, Any] | None = None, **flags: bool
    ) -> "Planned":
        return Planned(solution.name, group, notes, lambda: solution, dict(params or {}), **flags)


def _reference(problem: Problem, variant: CompileVariant, notes: str, **flags: bool) -> Planned:
    return Planned.of(compiled.solution(problem, variant), f"reference/{variant.name}", notes, **flags)


def _tuned(problem: Problem, gpu: bool, found: subgraph_solution.Found | None = None, search: bool = False) -> Planned:
    # Not prechecked: it checks Inductor's numerics itself, on the call's inputs, and keeps eager's where they miss.
    # On a GPU it is the sure pass too: its ways include the floor's graph of eager, and it reads T_b by design.
    # Families found in the reference are one more of its ways, chosen per input signature where they are fastest.
    try:
        sol = compiled.tuned_solution(problem, gpu, subgraph_solution.families_way(found) if found else None, search)
    except Exception as e:  # noqa: BLE001 - the families' way must not cost the sure pass
        _log.warning("tuned candidate for %s without its families' way: %s: %s", problem.name, type(e).__name__, e)
        sol = compiled.tuned_solution(problem, gpu, search=search)
    ways = "graph of eager, graph of Inductor, Inductor"
    if gpu and search:
        ways += ", graph of Inductor retuned by coordinate descent"
    if gpu and found is not None and found.replaced:
        ways += f", graph of the reference with {'+'.join(found.families)} replaced"
    return Planned.of(sol, "reference/tuned", f"the fastest of the reference's ways per input signature, timed on "
                      f"its first call ({ways})" if gpu else
                      "the faster of eager and Inductor's C++ code per input signature, timed on its first call",
                      bar=True, floor=gpu)  # fmt: skip


def _is_gpu(device: str) -> bool:
    return device.startswith("cuda")


def _subgraph(problem: Problem, found: subgraph_solution.Found) -> tuple[Planned, bool] | None:
    """The subgraph candidate, where families are found inside the reference, and whether they were found
    inside a larger problem (else they are the whole of it); None (the reason logged) where none is, or
    anything on the way fails: this candidate is never why a plan breaks."""
    if not found.replaced:
        _log.info("no subgraph candidate for %s: %s", problem.name, found.why)
        return None
    try:
        sol = subgraph_solution.solution(problem, found)
    except Exception as e:  # noqa: BLE001 - a candidate that does not render is left out, not fatal
        _log.warning("subgraph candidate for %s not rendered: %s: %s", problem.name, type(e).__name__, e)
        return None
    notes = "families replaced inside the reference, the rest by Inductor: " + "; ".join(
        r.description for r in found.replaced
    )
    return Planned.of(sol, f"subgraph/{'+'.join(found.families)}", notes, inductor=True), found.inside_larger


def plan(
    problem: Problem,
    device: str,
    language: str | None = None,
    probe: Probe | None = None,
    exporter: Callable[[Problem, CompileVariant], Solution] | None = None,
) -> Iterator[Planned]:
    """Every candidate for ``problem`` on ``device``, best bet first (lazily rendered).

    ``probe``: the problem's reference outputs on the CPU, which every family's bindings are checked
    against; pass one to share it between plans of the same problem. ``exporter``: makes the exported
    Inductor candidates (``export.ordered_variants``); given only where this process has the device.
    """
    gpu = _is_gpu(device)
    probe = probe if probe is not None else Probe(problem)
    sig = trace_ops(problem)
    langs = tuple(lang for lang in GPU_LANGUAGE_AUTO if _writable(lang)) if gpu else ("pytorch",)
    if language is not None:
        langs = tuple(lang for lang in (GPU_LANGUAGE_ORDER if gpu else langs) if lang == language)
    want_reference = language in (None, "pytorch")
    found = subgraph_solution.find(problem) if gpu and (want_reference or language == "triton") else None
    if want_reference:
        if gpu:
            yield _tuned(problem, gpu=True, found=found, search=compiled.inductor_search_pays(sig))
            yield _reference(problem, compiled.FLOOR, "the reference replayed as a CUDA graph", floor=True)
        else:
            yield _reference(problem, compiled.EAGER, "the reference, eager", floor=True)
            yield _tuned(problem, gpu=False)
    sub = _subgraph(problem, found) if found is not None and language in (None, "triton") else None
    bound = [(fam, b) for fam in FAMILIES for b in fam.match(problem, sig, probe)]
    # A template bound to the problem is one kernel for all of it; the subgraph candidate leads only where no
    # template binds and its families sit inside a larger problem.
    sub_first = sub is not None and sub[1] and not bound
    if sub is not None and sub_first:
        yield sub[0]
    for lang in langs:
        for i, (fam, binding) in enumerate(bound):
            for r in fam.renderers:
                if r.language != lang or (r.needs_gpu and not gpu) or not r.accepts(binding):
                    continue
                rendered: set[tuple[tuple[str, str], ...]] = set()
                for params in r.variants():
                    sol = build_solution(problem, fam.name, r, binding, params)
                    sources = tuple((src.path, src.content) for src in sol.sources)
                    if sources in rendered:  # a knob this binding does not use: the same kernel, another name
                        continue
                    rendered.add(sources)
                    notes = f"template {fam.name} ({lang}) {params}; ops: {sig}"
                    yield Planned.of(sol, f"{fam.name}/{lang}/{i}", notes, params)
    if sub is not None and not sub_first:
        yield sub[0]
    if want_reference and not gpu:
        for v in compiled.CPU_VARIANTS:
            yield _reference(problem, v, f"torch.compile (Inductor C++): {v.name}", inductor=True)
    if want_reference and gpu:
        if exporter is not None:
            for v in export.ordered_variants(problem):
                yield Planned(export.solution_name(problem, v), f"reference/{v.name}",
                              f"Inductor's code exported: {v.name}", partial(exporter, problem, v),
                              inductor=True)  # fmt: skip
        for v in compiled.ordered_variants(problem):
            yield _reference(problem, v, f"torch.compile: {v.name}", inductor=True)
        yield _reference(problem, compiled.EAGER, "the reference, eager")


@dataclass
class OfflineAgent:
    """Deterministic candidates from templates and the reference. State: its plan and proposals, per problem."""

    language: str | None = None
    max_candidates: int = 64
    plan_exports: bool = True  # plan exported Inductor candidates where this process has the device
    export_seconds: float = 120.0  # Inductor's time to export one problem (all its workloads) before giving up
    only_groups: tuple[str, ...] = ()  # plan only groups whose name starts with one of these (benches: A/B runs)
    precheck: bool = True  # check Inductor candidates against the eager reference before offering them
    precheck_seconds: float = 240.0  # one check's time box: compile and run on the smallest workload
    policy: SearchPolicy = field(default_factory=SearchPolicy)
    kin: Kin = field(default_factory=dict)  # what other problems measured of these templates (``transfer.py``)
    _proposed: dict[str, list[str]] = field(default_factory=dict)
    _plans: dict[tuple[str, str], list[Planned]] = field(default_factory=dict)
    _probes: dict[str, Probe] = field(default_factory=dict)
    _exports: dict[tuple[str, str, str], tuple[export.ExportedModule, ...] | export.NotExportable] = field(
        default_factory=dict
    )
    _not_exported: dict[str, dict[str, str]] = field(default_factory=dict)  # problem -> variant -> why
    _checked: dict[tuple[str, str, str], precheck.Outcome] = field(default_factory=dict)  # (problem, where, name)
    _rejected: dict[str, dict[str, str]] = field(default_factory=dict)  # problem -> candidate -> why

    @property
    def name(self) -> str:
        return "offline" + (f":{self.language}" if self.language else "")

    def _exported(self, device: str, problem: Problem, variant: CompileVariant) -> Solution:
        # Variants with the same settings share Inductor's code, except that the CUDA-graph one is exported
        # destination-passing (its kernels store into the outputs): one export of each.
        key = (problem.name, device, repr(sorted(export.config_patches(variant).items())), variant.cuda_graph)
        if key not in self._exports:
            try:
                self._exports[key] = export.export_problem(problem, device, variant, self.export_seconds)
            except export.NotExportable as e:
                self._exports[key] = e
        got = self._exports[key]
        if isinstance(got, export.NotExportable):
            raise got
        return export.solution(problem, got, variant)

    def _numerics(self, problem: Problem, device: str, name: str, solution: Solution) -> str | None:
        """Why ``solution`` misses the eager reference's tolerance, or None (passed, or not checkable here)."""
        where = precheck.check_device(device)
        if not self.precheck or where is None:
            return None
        key = (problem.name, where, name)
        if key not in self._checked:
            self._checked[key] = precheck.check(problem, solution, where, self.precheck_seconds)
        got = self._checked[key]
        return None if got.ok else got.reason

    def propose(self, problem: Problem, history: Sequence[AttemptFeedback], device: str) -> Candidate | None:
        done = self._proposed.setdefault(problem.name, [])
        if len(done) >= self.max_candidates:
            return None
        key = (problem.name, "gpu" if _is_gpu(device) else "cpu")
        if key not in self._plans:  # matching probes the reference on the CPU: once per problem
            probe = self._probes.setdefault(problem.name, Probe(problem))
            # exporting runs Inductor on the device, so only where this process has it (not on a CPU worker)
            here = self.plan_exports and _is_gpu(device) and torch.cuda.is_available()
            exporter = partial(self._exported, device) if here else None
            planned = plan(problem, device, self.language, probe, exporter)
            self._plans[key] = [p for p in planned if not self.only_groups or p.group.startswith(self.only_groups)]
        planned = self._plans[key]
        options = [Option(p.name, p.group, p.params, p.floor, p.bar) for p in planned]
        verdicts = {a.solution.name: verdict(a) for a in history}
        skipped = self._not_exported.setdefault(problem.name, {})
        rejected = self._rejected.setdefault(problem.name, {})
        kin = priors(options, self.kin)
        while (pick := self.policy.next(options, set(done), verdicts, set(skipped) | set(rejected), kin)) is not None:
            p = next(p for p in planned if p.name == pick.name)
            try:
                sol = p.make()
            except export.NotExportable as e:
                skipped[p.name] = str(e)
                continue
            if p.inductor and (why := self._numerics(problem, device, p.name, sol)) is not None:
                rejected[p.name] = why
                continue
            done.append(p.name)
            notes = "; ".join(n for n in (p.notes, kin.note(pick)) if n)
            return Candidate(solution=sol, agent=self.name, language=sol.spec.languages[0].value, notes=notes)
        return None

    def probe_with(self, problem: Problem) -> None:
        """Check template bindings of ``problem.name`` on this problem's workloads rather than the ones later
        proposed for: a bench that judges a subset of large workloads (whose CPU probe would be too big to
        run, so no template would bind) still probes on the full problem's small ones."""
        self._probes[problem.name] = Probe(problem)

    def not_exported(self, problem: Problem) -> Mapping[str, str]:
        """Why planned exports of ``problem`` were skipped (candidate name -> reason)."""
        return dict(self._not_exported.get(problem.name, {}))

    def numerics_rejected(self, problem: Problem) -> Mapping[str, str]:
        """Inductor candidates of ``problem`` not offered because they missed the eager reference's tolerance
        (or failed, or overran the time box) in the precheck (candidate name -> reason)."""
        return dict(self._rejected.get(problem.name, {}))
