"""Agent side: find the families inside a problem's reference, and render the subgraph candidate.

``find`` captures the reference on its smallest workload (fake tensors: nothing of the workload is computed; where
expert loops stop that, real inputs and ``loops.py``) and replaces every region that reproduces on random CPU
inputs; the candidate is planned only when at least one did, or when the capture stood in for an op with a host
sync (``stand_ins.py``). ``solution`` writes the candidate: ``kernel.py`` (the reference, ``replay.py``'s text and
the entry that hands them to ``runtime.Runner``) and this package's shipped modules as real files under
``sf_subgraph/``, which the judge puts on the candidate's import path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch.fx import Node

from sol_bench.inputs import make_inputs
from sol_bench.models import Solution
from sol_bench.problem import Problem
from sol_bench.reference import load_reference

from ..compiled import FamiliesWay, replay_source
from ..entry_solution import entry_solution
from .capture import NotCapturable, capture
from .loops import accounted, grouped
from .ops import NAMESPACE
from .region import target_name
from .rewrite import Replaced, rewrite

PACKAGE = "sf_subgraph"  # the shipped package's import name inside a candidate
# Ops that only view, move or cast data: not counted as the rest of a problem.
_LAYOUT = {"view", "_unsafe_view", "reshape", "expand", "clone", "contiguous", "unsqueeze", "squeeze", "alias",
           "t", "transpose", "permute", "split", "split_with_sizes", "chunk", "select", "slice", "getitem",
           "_to_copy", "detach", "lift_fresh_copy", "copy"}  # fmt: skip
_HERE = Path(__file__).parent
_AGENT_ONLY = {"solution.py"}  # imports solforge: never shipped
_REAL_TRACE_BYTES = 512 << 20  # traced with real inputs, run on the CPU on three input sets: not the largest


@dataclass(frozen=True)
class Found:
    """What ``find`` replaced in a problem's reference (empty, with ``why``, when nothing)."""

    replaced: tuple[Replaced, ...]
    why: str = ""
    rest: tuple[str, ...] = ()  # the ops left to Inductor beside them (layout and casts aside), sorted

    @property
    def inside_larger(self) -> bool:
        """Whether the families were found inside a larger problem rather than being the whole of it."""
        return bool(self.rest)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({r.family for r in self.replaced}))


def _example_inputs(problem: Problem) -> list:
    d = problem.definition
    ref = load_reference(d)
    w = min(problem.workloads, key=problem.workload_bytes)
    meta = make_inputs(d, w, "meta", seed=0, reference=ref)
    # empty CPU tensors of the workload's shapes: the fake-tensor trace reads only their metadata
    return [torch.empty(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v for v in meta.values()]


def _grouped_loops(problem: Problem, fn, why: NotCapturable) -> torch.fx.GraphModule:
    """The reference with its expert loops grouped (``loops.py``), traced on real inputs of the smallest workload
    and checked on inputs of two other seeds there; re-raises ``why`` where that fails too."""
    d = problem.definition
    w = min(problem.workloads, key=problem.workload_bytes)
    if problem.workload_bytes(w) > _REAL_TRACE_BYTES:
        raise NotCapturable(f"{why}; not traced with real inputs: {problem.workload_bytes(w) >> 20} MiB")
    ref = load_reference(d)
    real = [list(make_inputs(d, w, "cpu", seed=s, reference=ref).values()) for s in (0, 1, 2)]
    try:
        return grouped(fn, real[0], check=real[1:])
    except NotCapturable as e:
        raise NotCapturable(f"{why}; {e}") from e
    except Exception as e:  # noqa: BLE001 - a reference that does not run traced, a graph that breaks
        raise NotCapturable(f"{why}; expert loops: {_what(e)}") from e


def find(problem: Problem) -> Found:
    """The verified family regions of ``problem``'s reference (CPU only). Never raises: whatever goes wrong
    (a reference that does not load or trace, inputs that need a device, a matcher's own error) is an empty
    ``Found`` whose ``why`` says what."""
    if not problem.workloads:
        return Found((), "no workload")
    try:
        args = _example_inputs(problem)
    except Exception as e:  # noqa: BLE001 - inputs that need a real device or data: no graph, no candidate
        return Found((), f"no example inputs: {_what(e)}")
    try:
        fn = load_reference(problem.definition).run
        try:
            gm = capture(fn, args)
        except NotCapturable as e:
            gm = _grouped_loops(problem, fn, e)
    except NotCapturable as e:
        return Found((), f"not captured: {e}")
    except Exception as e:  # noqa: BLE001 - a reference that does not load, inputs that do not build
        return Found((), f"no reference: {_what(e)}")
    try:
        gm, done = rewrite(gm, "cpu")
    except Exception as e:  # noqa: BLE001 - a matcher or check that breaks on this graph: no candidate
        return Found((), f"rewrite failed: {_what(e)}")
    # a stand-in that takes a host sync out (a MoE layer's grouped GEMMs, its counts per expert) lets the whole
    # call be one CUDA graph, which the reference itself cannot be: worth a candidate of its own
    done = accounted(gm, done)
    rest = sorted(target_name(n) for n in gm.graph.nodes if n.op == "call_function" and _computes(n))
    return Found(tuple(done), "" if done else "no family region reproduced", tuple(rest))


def _computes(node: Node) -> bool:
    return not str(node.target).startswith(f"{NAMESPACE}.") and target_name(node) not in _LAYOUT


def _what(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip()[:200]}"


def shipped_files() -> dict[str, str]:
    """The package's modules a candidate carries, path inside the solution -> text."""
    out = {}
    for path in sorted(_HERE.rglob("*.py")):
        rel = path.relative_to(_HERE)
        if rel.as_posix() not in _AGENT_ONLY:
            out[f"{PACKAGE}/{rel.as_posix()}"] = path.read_text()
    return out


_ENTRY = """

# ---- solforge offline wrapper: subgraph (families replaced inside the reference, the rest by Inductor) ----
{replay}
from {package}.runtime import Runner as _Runner

_runner = _Runner(run, {n_outputs}, _into, _graphed, _signature)


def solforge_entry(*args):
    _runner(*args)
"""


def render(problem: Problem) -> str:
    """``kernel.py``: the reference followed by the entry."""
    n_out = len(problem.definition.outputs)
    entry = _ENTRY.format(replay=replay_source(), package=PACKAGE, n_outputs=n_out)
    return problem.definition.reference.rstrip() + "\n" + entry


def solution(problem: Problem, found: Found) -> Solution:
    families = "+".join(found.families) or "none"
    return entry_solution(
        problem, name=f"{problem.name}__subgraph_{families.replace('+', '_')}", author="solforge-offline-subgraph",
        description=f"the reference with {families} replaced by their kernels, the rest by Inductor, one CUDA graph",
        language="triton", destination_passing=True, kernel=render(problem), files=shipped_files(),
    )


def families_way(found: Found) -> FamiliesWay | None:
    """What the tuned candidate needs to run ``found``'s families as one of its ways (None where none was found)."""
    return FamiliesWay(PACKAGE, shipped_files(), found.families) if found.replaced else None
