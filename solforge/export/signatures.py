"""The input signatures a winner was judged on, computed from its problem's definition and workloads."""

from __future__ import annotations

from typing import Any, Iterable

from sol_bench import dtypes
from sol_bench.models import Definition
from sol_bench.problem import Problem


def _torch_name(dtype: str) -> str:
    return str(dtypes.to_torch(dtype)).removeprefix("torch.")


def judged_signatures(problem: Problem, workload_uuids: Iterable[str]) -> list[dict[str, Any]]:
    """One entry per distinct judged signature: storage shape and torch dtype of each tensor input and of each
    output, and the values of the scalar inputs the workload fixed (a custom input function may draw others)."""
    wanted = set(workload_uuids)
    d = problem.definition
    out: list[dict[str, Any]] = []
    for w in problem.workloads:
        if w.uuid not in wanted:
            continue
        env = d.resolve_axes(w.axes)
        entry = {
            "tensors": [
                [list(dtypes.storage_shape(s.dtype, s.concrete_shape(env))), _torch_name(s.dtype)]
                for s in d.inputs.values() if not s.is_scalar
            ],
            "scalars": {
                n: src.value
                for n, src in w.inputs.items()
                if src.type == "scalar" and n in d.inputs and d.inputs[n].is_scalar
            },
            "outputs": [
                [list(dtypes.storage_shape(s.dtype, s.concrete_shape(env))), _torch_name(s.dtype)]
                for s in d.outputs.values()
            ],
        }
        if entry not in out:
            out.append(entry)
    return out


def python_annotation(definition: Definition, name: str) -> str:
    """The type an input has in the custom op's Python signature."""
    spec = definition.inputs[name]
    if not spec.is_scalar:
        return "torch.Tensor"
    if spec.dtype == "bool":
        return "bool"
    return "float" if dtypes.info(spec.dtype).is_float else "int"
