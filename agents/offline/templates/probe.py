"""Probing: a binding is accepted only if its semantics reproduce the reference on the CPU.

The op list only pre-filters (which family could apply, which input plays which role). A ``Probe`` runs
the reference once per problem on the CPU, on its smallest workload (and the next one, if also small),
and each candidate binding is checked against those outputs with the workload's tolerance, through the
judge's own comparison: either a family's plain-torch model of its semantics, or the family's rendered
PyTorch-language source. A problem whose smallest workload is too big for a quick CPU run, or whose
reference does not run on the CPU, binds nothing (``Probe.skipped`` says why). Running for real, the probe
also takes references with data-dependent ops (``nonzero``, ``unique``, boolean indexing, ...), which the
meta tracer cannot run.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from sol_bench.correctness import compare
from sol_bench.dtypes import to_torch
from sol_bench.inputs import make_inputs, output_specs
from sol_bench.models import Tolerance, Workload
from sol_bench.problem import Problem
from sol_bench.reference import load_reference

PROBE_BYTES = 64 << 20  # inputs + outputs of a probed workload; larger ones are not run on the CPU
PROBE_WORKLOADS = 2  # the smallest workload, and the next one when it is also small (more shapes seen)
_SEED = 11


@dataclass(frozen=True)
class Case:
    """One probed workload: its CPU inputs, the reference's outputs, its tolerance."""

    workload: Workload
    inputs: Mapping[str, Any]
    expected: tuple[torch.Tensor, ...]
    tolerance: Tolerance


def workload_bytes(problem: Problem, w: Workload) -> int:
    d = problem.definition
    env = d.resolve_axes(w.axes)
    total = 0
    for spec in [*d.inputs.values(), *d.outputs.values()]:
        if not spec.is_scalar:
            total += math.prod(spec.concrete_shape(env)) * to_torch(spec.dtype).itemsize
    return total


@dataclass
class Probe:
    """The reference's CPU outputs on a problem's smallest workload(s); computed on first use, then kept."""

    problem: Problem
    max_bytes: int = PROBE_BYTES
    _cases: list[Case] | None = field(default=None, init=False, repr=False)
    _skipped: str | None = field(default=None, init=False, repr=False)

    @property
    def cases(self) -> list[Case]:
        """Empty when the problem cannot be probed (too big, or the reference fails on the CPU)."""
        if self._cases is None:
            self._cases = self._run()
        return self._cases

    @property
    def skipped(self) -> str | None:
        """Why the problem was not probed (None when it was)."""
        _ = self.cases
        return self._skipped

    def _run(self) -> list[Case]:
        ws = sorted(self.problem.workloads, key=lambda w: workload_bytes(self.problem, w))
        if not ws:
            return self._skip("no workload")
        if (size := workload_bytes(self.problem, ws[0])) > self.max_bytes:
            return self._skip(f"smallest workload moves {size} B > {self.max_bytes} B")
        d = self.problem.definition
        cases = []
        try:
            ref = load_reference(d)
            for w in ws[:PROBE_WORKLOADS]:
                if workload_bytes(self.problem, w) > self.max_bytes:
                    break
                inputs = make_inputs(d, w, "cpu", seed=_SEED, reference=ref)
                with torch.no_grad():
                    out = ref.run(*_copy(inputs).values())  # a reference may write into its inputs
                expected = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                if len(expected) != len(d.outputs) or not all(isinstance(e, torch.Tensor) for e in expected):
                    return self._skip(f"the reference returned {len(expected)} values, not {len(d.outputs)} tensors")
                cases.append(Case(w, inputs, expected, w.tolerance))
        except Exception as e:  # a reference that does not run on the CPU cannot be probed
            return self._skip(f"the reference failed on the CPU: {type(e).__name__}: {str(e)[:200]}")
        return cases

    def _skip(self, why: str) -> list[Case]:
        self._skipped = why
        return []

    def reproduces(self, fn: Callable[[Case], Any]) -> bool:
        """Whether ``fn(case)`` (the outputs, a tensor or a tuple) matches the reference on every case."""
        if not self.cases:
            return False
        for c in self.cases:
            try:
                with torch.no_grad():
                    got = fn(Case(c.workload, _copy(c.inputs), c.expected, c.tolerance))
                got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
                if len(got) != len(c.expected):
                    return False
                for name, g, e in zip(self.problem.definition.outputs, got, c.expected):
                    compare(name, g, e, c.tolerance)  # raises on a mismatch
            except Exception:
                return False
        return True


def _copy(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def run_rendered(problem: Problem, source: str, case: Case) -> tuple[torch.Tensor, ...]:
    """Execute a rendered PyTorch-language (destination-passing) source on a case's inputs; its outputs."""
    module = types.ModuleType("solforge_probe_candidate")
    exec(compile(source, "<probe>", "exec"), module.__dict__)
    outs = [torch.empty(s, dtype=t) for s, t in output_specs(problem.definition, case.workload).values()]
    module.run(*case.inputs.values(), *outs)
    return tuple(outs)
