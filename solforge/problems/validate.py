"""Check a problem directory the way the bundled set is checked: it loads, its reference runs on the CPU on
its smallest workload with outputs of the declared shapes and dtypes, and the SOL model can analyse it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from sol_bench.inputs import InputContext, make_inputs, output_specs
from sol_bench.problem import Problem, load_problem
from sol_bench.reference import load_reference


@dataclass(frozen=True)
class Validation:
    name: str
    path: Path
    smallest: str  # uuid of the workload run on the CPU
    cpu_seconds: float
    t_sol_ms: tuple[float, ...] | None  # per workload, None where the analyzer is unavailable


class ProblemInvalid(Exception):
    """The problem failed a check; the message names the problem and the check."""


def smallest_workload(problem: Problem):
    return min(problem.workloads, key=lambda w: math.prod(problem.definition.resolve_axes(w.axes).values()))


def run_reference_cpu(problem: Problem, seed: int = 0) -> tuple[str, float]:
    """Run the reference on the CPU on the smallest workload; return its uuid and wall seconds."""
    d = problem.definition
    w = smallest_workload(problem)
    ref = load_reference(d)
    inputs = make_inputs(d, w, "cpu", seed, reference=ref, ctx=InputContext(problem_dir=problem.path))
    start = time.perf_counter()
    with torch.no_grad():
        out = ref.run(*inputs.values())
    seconds = time.perf_counter() - start
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    specs = output_specs(d, w)
    if len(outs) != len(specs):
        raise ProblemInvalid(f"{d.name}: reference returned {len(outs)} outputs, the definition declares {len(specs)}")
    for (name, (shape, dtype)), t in zip(specs.items(), outs):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != dtype:
            got = f"{tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ProblemInvalid(f"{d.name}: output {name} is {got}, declared {shape} {dtype}")
        if t.is_floating_point() and not torch.isfinite(t.float()).all():
            raise ProblemInvalid(f"{d.name}: output {name} has NaN or Inf on workload {w.uuid}")
    return w.uuid, seconds


def sol_times(problem: Problem, hardware: str = "H200") -> tuple[float, ...] | None:
    """T_SOL (ms) of every workload on ``hardware``, or None when the SOL analyzer is not installed."""
    try:
        from sol_bench.sol.analyze import analyze_problem
        from sol_bench.sol.hardware import get_hardware
    except ImportError:
        return None
    return tuple(r.t_sol_ms for r in analyze_problem(problem, get_hardware(hardware)))


def validate_problem(path: Path, sol: bool = True, hardware: str = "H200") -> Validation:
    problem = load_problem(Path(path))
    uuid, seconds = run_reference_cpu(problem)
    times = sol_times(problem, hardware) if sol else None
    return Validation(name=problem.name, path=problem.path, smallest=uuid, cpu_seconds=seconds, t_sol_ms=times)
