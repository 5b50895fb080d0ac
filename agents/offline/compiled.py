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
from typing import Mapping

from sol_bench.models import Solution
from sol_bench.problem import Problem

from . import replay
from .entry_solution import entry_solution
from .graph import OpSignature, shapes

AUTHOR = "solforge-offline-compiled"


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
    return entry_solution(
        problem, name=f"{problem.name}__ref_{variant.name}", author=AUTHOR,
        description=f"the reference, {variant.name}", language="pytorch", destination_passing=variant.cuda_graph,
        kernel=render(problem, variant),
    )  # fmt: skip


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


TUNED_MODULE = "solforge_tuned"  # the name ``tuned.py`` has inside the candidate

_TUNED_GPU = """
_dps = _into(_reference_run, {n_out})
_compiled = _torch.compile(_dps, dynamic=False)
_ways = [
    _Way("graph_of_eager", lambda args: _graphed(_dps, args, "eager"), lambda args: _forget_graph(args, "eager")),
    _Way("graph_of_compile", lambda args: _graphed(_compiled, args, "compile"),
         lambda args: _forget_graph(args, "compile")),
    _Way("compile", lambda args: _compiled(*args)),
]
"""

# Inductor's own kernels retuned by coordinate descent (each kernel's block sizes and warps searched by timing
# neighbours at compile time): at the largest workloads of a dev set's RMSNorm, RMSNorm backward and softmax it
# read 1.3-1.5x faster than the default compile, on its other norms and element-wise ops 0.95-1.09x (timed, and
# kept only where fastest). Its own function, so Dynamo keeps its compiles apart from the default one's.
_TUNED_INDUCTOR_SEARCH = """
def _dps_searched(*args):
    return _dps(*args)


_searched = _torch.compile(_dps_searched, dynamic=False, options={"coordinate_descent_tuning": True})
_ways.append(_Way("graph_of_compile_searched", lambda args: _graphed(_searched, args, "searched"),
                  lambda args: _forget_graph(args, "searched")))
"""

# Ops whose time goes to library kernels (cuBLAS, cuDNN, flash attention) that Inductor's tuning never touches.
_LIBRARY_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_mm", "_scaled_grouped_mm",
                          "linear", "convolution", "_convolution", "cudnn_convolution"})  # fmt: skip
_LIBRARY_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention", "_cudnn_attention")
SEARCH_MAX_OPS = 48  # coordinate descent times every kernel of the graph: compile time grows with its size


def inductor_search_pays(sig: OpSignature) -> bool:
    """Whether the tuned candidate also times Inductor's code retuned by coordinate descent: where the reference's
    time is in Inductor's own kernels (no GEMM, convolution or attention library call) and its graph is small."""
    if not sig.known or sum(sig.ops.values()) > SEARCH_MAX_OPS:
        return False
    return not any(op in _LIBRARY_OPS or op.startswith(_LIBRARY_PREFIXES) for op in sig.ops)


# Where families were found inside the reference (``subgraph/``): the reference with them replaced by their
# kernels, the rest by Inductor, replayed as one graph; kept, like every way, only where it agrees and is fastest.
_TUNED_FAMILIES = """
from {package}.runtime import Runner as _Runner
_families = _Runner(_reference_run, {n_out}, _into, _graphed, _signature)
_ways.append(_Way("graph_of_families", lambda args: _families(*args), lambda args: _forget_graph(args)))
"""

_TUNED_CPU = """
_compiled = _torch.compile(_reference_run, dynamic=False)
_ways = [_Way("eager", lambda args: _reference_run(*args)), _Way("compile", lambda args: _compiled(*args))]
"""

_TUNED = """

# ---- solforge offline wrapper: tuned (the fastest way of running the reference, per input signature) ----
{replay}
from {module} import Tolerance as _Tolerance, Tuned as _Tuned, Way as _Way

_reference_run = run
{ways}
_tuned = _Tuned(_ways, n_inputs={n_in}, dps={dps}, tolerance=_Tolerance({atol!r}, {rtol!r}, {matched!r}),
                signature=_signature)


def solforge_entry(*args):
    return _tuned(args)
"""


def strictest_tolerance(problem: Problem) -> tuple[float, float, float]:
    """(atol, rtol, share matched) that every workload's tolerance accepts."""
    tols = [w.tolerance for w in problem.workloads]
    return (min(t.max_atol for t in tols), min(t.max_rtol for t in tols),
            max(t.required_matched_ratio for t in tols))  # fmt: skip


def render_tuned(problem: Problem, gpu: bool, families_package: str | None = None, search: bool = False) -> str:
    """``families_package``: the shipped subgraph package's import name, to add the families' way (GPU only);
    ``search``: add Inductor's code retuned by coordinate descent (GPU only, ``inductor_search_pays``)."""
    d = problem.definition
    atol, rtol, matched = strictest_tolerance(problem)
    ways = _TUNED_GPU.format(n_out=len(d.outputs)) if gpu else _TUNED_CPU
    if gpu and search:
        ways = ways.rstrip("\n") + "\n" + _TUNED_INDUCTOR_SEARCH
    if gpu and families_package:
        ways = ways.rstrip("\n") + "\n" + _TUNED_FAMILIES.format(package=families_package, n_out=len(d.outputs))
    return d.reference.rstrip() + "\n" + _TUNED.format(
        replay=replay_source(), module=TUNED_MODULE, ways=ways.strip("\n"), n_in=len(d.inputs), dps=gpu,
        atol=atol, rtol=rtol, matched=matched,
    )  # fmt: skip


@dataclass(frozen=True)
class FamiliesWay:
    """Families found inside a reference, as the tuned candidate carries them (``subgraph.solution.families_way``):
    the shipped package's import name, its files (path in the solution -> text) and the families' names."""

    package: str
    files: Mapping[str, str]
    families: tuple[str, ...]


def tuned_solution(problem: Problem, gpu: bool, families: FamiliesWay | None = None, search: bool = False) -> Solution:
    """The reference run the fastest of its ways per input signature, measured on the signature's first call
    (``tuned.py``): on a GPU a graph of eager, a graph of Inductor's code, or Inductor's code, with ``search`` a
    graph of Inductor's code retuned by coordinate descent, and with ``families`` a graph of the reference with
    their kernels; on the CPU eager or Inductor's C++ code. Destination-passing on a GPU (the graphs write into the
    judge's buffers)."""
    from . import tuned

    files = {f"{TUNED_MODULE}.py": Path(tuned.__file__).read_text()}
    package = families.package if gpu and families is not None else None
    ways = "graph of eager, graph of Inductor, Inductor"
    if gpu and search:
        ways += ", graph of Inductor retuned by coordinate descent"
    if package:
        files |= dict(families.files)
        ways += f", graph of {'+'.join(families.families)}"
    return entry_solution(
        problem, name=f"{problem.name}__ref_tuned", author=AUTHOR,
        description=f"the reference, the fastest of its ways per input signature ({ways})" if gpu else
        "the reference, the fastest of its ways per input signature", language="pytorch",
        destination_passing=gpu, kernel=render_tuned(problem, gpu, package, search), files=files,
    )  # fmt: skip
