"""What a reference computes, seen through the aten ops it dispatches on the meta device.

The offline generators pick templates by this signature and bind the definition's inputs to the roles a
template needs (the rows to normalise, the weight, eps, ...).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sol_bench.inputs import make_inputs
from sol_bench.problem import Problem
from sol_bench.reference import load_reference


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name.removeprefix("aten::"))
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class OpSignature:
    """The aten ops of one reference call (on the first workload's shapes), with counts."""

    ops: Counter

    def has(self, *names: str) -> bool:
        return all(self.ops.get(n, 0) > 0 for n in names)

    def has_any(self, *names: str) -> bool:
        return any(self.ops.get(n, 0) > 0 for n in names)

    def only(self, allowed: set[str]) -> bool:
        return set(self.ops) <= allowed

    def __str__(self) -> str:
        return ", ".join(f"{k}×{v}" for k, v in sorted(self.ops.items()))


def trace_ops(problem: Problem) -> OpSignature:
    """Run the reference on meta tensors and record every aten op it dispatches."""
    ref = load_reference(problem.definition)
    inputs = make_inputs(problem.definition, problem.workloads[0], "meta", seed=0, reference=ref)
    rec = _Recorder()
    with rec:
        ref.run(*inputs.values())
    return OpSignature(Counter(rec.ops))


@dataclass(frozen=True)
class InputRoles:
    """Definition input names of each role a template may need, and its scalar inputs."""

    tensors: tuple[str, ...]
    scalars: tuple[str, ...]
    out_name: str
    out_rank: int

    @staticmethod
    def of(problem: Problem) -> "InputRoles":
        d = problem.definition
        tensors = tuple(n for n, s in d.inputs.items() if not s.is_scalar)
        scalars = tuple(n for n, s in d.inputs.items() if s.is_scalar)
        out_name, out = next(iter(d.outputs.items()))
        return InputRoles(tensors, scalars, out_name, len(out.shape or []))


def shapes(problem: Problem, device: str = "meta") -> list[dict[str, Any]]:
    """Concrete input shapes (or scalar values) of every workload."""
    out = []
    for w in problem.workloads:
        env = problem.definition.resolve_axes(w.axes)
        row = {}
        for name, spec in problem.definition.inputs.items():
            src = w.inputs.get(name)
            row[name] = src.value if src is not None and src.type == "scalar" else spec.concrete_shape(env)
        out.append(row)
    return out


def dtype_of(problem: Problem, name: str) -> torch.dtype:
    from sol_bench.dtypes import to_torch

    spec = problem.definition.inputs.get(name) or problem.definition.outputs[name]
    return to_torch(spec.dtype)
