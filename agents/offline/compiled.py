"""Candidates derived from the reference itself: eager, torch.compile over modes/options, CUDA-graph wrapped.

Each is a pytorch-language solution whose one file is the reference source followed by a wrapper. The plain
ones return what the reference returns (destination_passing_style False); the CUDA-graph ones take the
outputs as arguments and replay one graph per buffer set that writes into them (``replay._graphed``): what is
compiled is the reference with its copy into the outputs (``replay._into``), so Inductor's kernels store the
results straight into the judge's buffers rather than a copy kernel after them. The
eager one is the safety net that always passes; ``FLOOR`` is eager replayed as a CUDA graph (eager's own
kernels, so eager's numerics, with one launch per call; a signature whose capture fails runs eagerly), the
first candidate on a GPU; the compiled ones are where the speed comes from: on a GPU Inductor's Triton
code, on the CPU its C++ code (``CPU_VARIANTS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sol_bench.models import Solution
from sol_bench.problem import Problem

from . import replay
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
FLOOR = CompileVariant("eager_cudagraph", mode=None, cuda_graph=True, needs_gpu=True)
VARIANTS: tuple[CompileVariant, ...] = (
    CompileVariant("inductor_default", mode="default", needs_gpu=True),
    CompileVariant("inductor_max_autotune", mode="max-autotune-no-cudagraphs", needs_gpu=True),
    CompileVariant(
        "inductor_coordinate_descent", mode="default",
        options=(("coordinate_descent_tuning", True), ("epilogue_fusion", True)), needs_gpu=True,
    ),  # fmt: skip
    CompileVariant("inductor_cudagraph", mode="default", cuda_graph=True, needs_gpu=True),
)
# Inductor's C++ backend (needs a C++ compiler where the candidate is judged). Its compile time is bounded by
# the agent's numerics precheck, which compiles the smallest workload within a time box first.
CPU_VARIANTS: tuple[CompileVariant, ...] = (CompileVariant("inductor_cpu", mode="default"),)


def replay_source() -> str:
    """The text of ``replay.py``, which generated candidates carry (they cannot import solforge)."""
    return Path(replay.__file__).read_text()


_WRAPPER = """

# ---- solforge offline wrapper: {variant} ----
{replay}
_reference_run = run
_target = {target}
_compiled = {compiled}


def solforge_entry(*args):
    {call}
"""


def render(problem: Problem, variant: CompileVariant) -> str:
    if variant.mode is None:
        compiled = "_target"
    else:
        opts = dict(variant.options)
        extra = f", options={opts!r}" if opts else f", mode={variant.mode!r}"
        compiled = f"_torch.compile(_target, dynamic=False{extra})"
    n_out = len(problem.definition.outputs)
    target = f"_into(_reference_run, {n_out})" if variant.cuda_graph else "_reference_run"
    call = "_graphed(_compiled, args)" if variant.cuda_graph else "return _compiled(*args)"
    return problem.definition.reference.rstrip() + "\n" + _WRAPPER.format(
        variant=variant.name, replay=replay_source(), target=target, compiled=compiled, call=call
    )


def solution(problem: Problem, variant: CompileVariant) -> Solution:
    return Solution.model_validate({
        "name": f"{problem.name}__ref_{variant.name}",
        "definition": problem.name,
        "author": "solforge-offline-compiled",
        "description": f"the reference, {variant.name}",
        "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::solforge_entry",
                 "destination_passing_style": variant.cuda_graph},
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


def ordered_variants(problem: Problem, variants: tuple[CompileVariant, ...] = VARIANTS) -> tuple[CompileVariant, ...]:
    """The search order: graphs first for launch-bound problems, last otherwise."""
    graphs = tuple(v for v in variants if v.cuda_graph)
    plain = tuple(v for v in variants if not v.cuda_graph)
    return graphs + plain if launch_bound(problem) else plain + graphs
