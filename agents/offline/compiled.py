"""Candidates derived from the reference itself: eager, torch.compile over modes/options, CUDA-graph wrapped.

Each is a pytorch-language solution whose one file is the reference source followed by a wrapper, with
destination_passing_style False (it returns what the reference returns). The eager one is the safety net
that always passes; the compiled ones are where the speed comes from on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from sol_bench.models import Solution
from sol_bench.problem import Problem

from .graph import shapes


@dataclass(frozen=True)
class CompileVariant:
    """One way to run the reference: how torch.compile is called, and whether replays go through a graph."""

    name: str
    mode: str | None = None  # None: eager
    options: tuple[tuple[str, object], ...] = ()
    cuda_graph: bool = False  # capture per input signature and replay (launch-bound workloads)
    needs_gpu: bool = False


EAGER = CompileVariant("eager")
VARIANTS: tuple[CompileVariant, ...] = (
    CompileVariant("inductor_default", mode="default", needs_gpu=True),
    CompileVariant("inductor_max_autotune", mode="max-autotune-no-cudagraphs", needs_gpu=True),
    CompileVariant(
        "inductor_coordinate_descent", mode="default",
        options=(("coordinate_descent_tuning", True), ("epilogue_fusion", True)), needs_gpu=True,
    ),  # fmt: skip
    CompileVariant("inductor_cudagraph", mode="default", cuda_graph=True, needs_gpu=True),
)

_WRAPPER = '''

# ---- solforge offline wrapper: {variant} ----
import torch as _torch

_reference_run = run
_compiled = {compiled}
_graphs = {{}}


def _signature(args):
    return tuple((tuple(a.shape), a.dtype, a.stride()) if isinstance(a, _torch.Tensor) else ("s", a) for a in args)


def _refresh(static, args):
    # One fused launch for every input (torch's foreach copy) rather than one copy per input: each launch
    # from Python costs host time, and between the call's first and last GPU activity that time is counted.
    dst = [s for s, a in zip(static, args) if isinstance(a, _torch.Tensor)]
    src = [a for a in args if isinstance(a, _torch.Tensor)]
    if hasattr(_torch, "_foreach_copy_"):
        _torch._foreach_copy_(dst, src)
    else:
        for s, a in zip(dst, src):
            s.copy_(a)


def _graphed(args):
    # One CUDA graph per input signature: static inputs are refreshed by copy every call, the graph is
    # replayed, and the outputs are cloned so nothing is shared between calls.
    key = _signature(args)
    entry = _graphs.get(key)
    if entry is None:
        static = [a.clone() if isinstance(a, _torch.Tensor) else a for a in args]
        stream = _torch.cuda.Stream()
        stream.wait_stream(_torch.cuda.current_stream())
        with _torch.cuda.stream(stream):
            for _ in range(3):
                _compiled(*static)
        _torch.cuda.current_stream().wait_stream(stream)
        graph = _torch.cuda.CUDAGraph()
        with _torch.cuda.graph(graph):
            out = _compiled(*static)
        entry = _graphs[key] = (graph, static, out)
    graph, static, out = entry
    _refresh(static, args)
    graph.replay()
    if isinstance(out, (tuple, list)):
        return type(out)(o.clone() for o in out)
    return out.clone()


def solforge_entry(*args):
    {call}
'''


def render(problem: Problem, variant: CompileVariant) -> str:
    if variant.mode is None:
        compiled = "_reference_run"
    else:
        opts = dict(variant.options)
        extra = f", options={opts!r}" if opts else f", mode={variant.mode!r}"
        compiled = f"_torch.compile(_reference_run, dynamic=False{extra})"
    call = "return _graphed(args)" if variant.cuda_graph else "return _compiled(*args)"
    return problem.definition.reference.rstrip() + "\n" + _WRAPPER.format(
        variant=variant.name, compiled=compiled, call=call
    )


def solution(problem: Problem, variant: CompileVariant) -> Solution:
    return Solution.model_validate({
        "name": f"{problem.name}__ref_{variant.name}",
        "definition": problem.name,
        "author": "solforge-offline-compiled",
        "description": f"the reference, {variant.name}",
        "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::solforge_entry",
                 "destination_passing_style": False},
        "sources": [{"path": "kernel.py", "content": render(problem, variant)}],
    })  # fmt: skip


def launch_bound(problem: Problem, threshold_bytes: int = 4 << 20) -> bool:
    """True when every workload moves little data, so launch overhead dominates and graphs pay off."""
    from sol_bench.dtypes import nbytes

    d = problem.definition
    for row in shapes(problem):
        total = 0
        for name, shape in row.items():
            if isinstance(shape, tuple):
                total += nbytes(d.inputs[name].dtype, shape)
        if total > threshold_bytes:
            return False
    return True


def ordered_variants(problem: Problem) -> tuple[CompileVariant, ...]:
    """The search order: graphs first for launch-bound problems, last otherwise."""
    graphs = tuple(v for v in VARIANTS if v.cuda_graph)
    plain = tuple(v for v in VARIANTS if not v.cuda_graph)
    return graphs + plain if launch_bound(problem) else plain + graphs
