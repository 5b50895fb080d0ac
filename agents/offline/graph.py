"""What a reference computes, seen through the aten ops it dispatches.

The offline generators pick templates by this signature and bind the definition's inputs to the roles a
template needs (the rows to normalise, the weight, eps, ...).

The reference is first run on meta tensors (no data, any size). Ops whose output shape depends on the data
(``nonzero``, ``bincount``, ``unique``, ``masked_select``, ``.item()``, boolean indexing, ...) have no meta
kernel, and a custom input function may call them too; such a reference is then run for real on the CPU,
on its smallest workload when that one is small enough. If neither works the signature is unknown: it
matches no template, and the agent still plans the reference-derived candidates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sol_bench.inputs import InputContext, make_inputs
from sol_bench.models import Workload
from sol_bench.problem import Problem
from sol_bench.reference import load_reference

# Inputs + outputs of the workload the CPU fallback may run (the template probe's cap too).
TRACE_BYTES = 64 << 20

TraceMethod = Literal["meta", "cpu", "none"]


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name.removeprefix("aten::"))
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class OpSignature:
    """The aten ops of one reference call, with counts, and how they were seen.

    ``method``: "meta" (first workload's shapes on meta tensors), "cpu" (the smallest workload run on the
    CPU, after the meta run failed) or "none" (neither ran: the signature is unknown and matches nothing).
    ``note`` says why the meta run (and, for "none", the CPU run) failed.
    """

    ops: Counter
    method: TraceMethod = "meta"
    note: str = field(default="", compare=False)

    @property
    def known(self) -> bool:
        return self.method != "none"

    def has(self, *names: str) -> bool:
        return all(self.ops.get(n, 0) > 0 for n in names)

    def has_any(self, *names: str) -> bool:
        return any(self.ops.get(n, 0) > 0 for n in names)

    def only(self, allowed: set[str]) -> bool:
        # an empty (unknown) op list is a subset of everything: it must not pass as "only these ops"
        return bool(self.ops) and set(self.ops) <= allowed

    def __str__(self) -> str:
        if not self.known:
            return f"unknown ({self.note})"
        ops = ", ".join(f"{k}×{v}" for k, v in sorted(self.ops.items()))
        return ops if self.method == "meta" else f"{ops} [traced on the CPU]"


def failure_line(e: BaseException, width: int = 200) -> str:
    """The exception's type and the first line of its message, cut to ``width``."""
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0][:width]}" if first else type(e).__name__


class TraceFailed(RuntimeError):
    """The reference ran neither on meta tensors nor on the CPU; the message says why each did not."""


def run_traced(problem: Problem, mode: Callable[[], TorchDispatchMode], workload: Workload | None = None,
               max_bytes: int = TRACE_BYTES) -> tuple[TorchDispatchMode, TraceMethod, str]:
    """The reference run once under a fresh ``mode()``: on meta tensors at ``workload`` (default the first),
    else, where that fails (data-dependent ops), for real on the CPU at ``workload`` (default the smallest) when
    its inputs and outputs are at most ``max_bytes``. Returns the mode that watched the run that completed, how
    it ran, and why the meta run failed ("" when it did not); raises ``TraceFailed`` when neither ran."""
    d = problem.definition
    ref = load_reference(d)
    ctx = InputContext(problem_dir=problem.path)
    try:
        watcher = mode()
        inputs = make_inputs(d, workload or problem.workloads[0], "meta", seed=0, reference=ref, ctx=ctx)
        with watcher:
            ref.run(*inputs.values())
        return watcher, "meta", ""
    except Exception as e:  # noqa: BLE001 - data-dependent ops have no meta kernel; run for real below
        meta_failed = f"meta: {failure_line(e)}"
    real = workload or min(problem.workloads, key=problem.workload_bytes)
    size = problem.workload_bytes(real)
    if size > max_bytes:
        raise TraceFailed(f"{meta_failed}; cpu: {'smallest ' if workload is None else ''}workload {size} B > "
                          f"{max_bytes} B")
    try:
        watcher = mode()
        inputs = make_inputs(d, real, "cpu", seed=0, reference=ref, ctx=ctx)
        with watcher:
            ref.run(*inputs.values())
        return watcher, "cpu", meta_failed
    except Exception as e:  # noqa: BLE001 - e.g. a reference that needs a GPU
        raise TraceFailed(f"{meta_failed}; cpu: {failure_line(e)}") from None


def trace_ops(problem: Problem, max_bytes: int = TRACE_BYTES) -> OpSignature:
    """Record every aten op the reference dispatches: on meta tensors, else on the CPU (smallest workload,
    at most ``max_bytes`` of inputs and outputs), else an unknown signature. Never raises for a reference
    that fails to trace."""
    try:
        load_reference(problem.definition)
    except Exception as e:  # noqa: BLE001 - a reference that does not load has no signature
        return OpSignature(Counter(), "none", f"reference does not load: {failure_line(e)}")
    if not problem.workloads:
        return OpSignature(Counter(), "none", "no workload")
    try:
        rec, method, note = run_traced(problem, _Recorder, max_bytes=max_bytes)
    except TraceFailed as e:
        return OpSignature(Counter(), "none", str(e))
    return OpSignature(Counter(rec.ops), method, note)


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
