"""One decoder layer of a catalog architecture, assembled from its cut problems and run with and without the
ops of an exported package: the end-to-end check that exported winners compose into a model block.

The layer is ``h = x + attention_block(rmsnorm(x)); y = h + mlp_block(rmsnorm(h))``, each call made with the
inputs its problem's definition names, in its order. The truth is the ``decoder_layer`` problem the same
architecture cuts (one reference for the whole layer), judged with that problem's tolerance. Stage calls go
to ``torch.ops.solforge_kernels.<op>`` where the package exported a winner for the stage's problem (the op
runs the winner on the shapes it was judged on, the reference elsewhere) and to the stage's reference
otherwise.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from sol_bench.correctness import compare
from sol_bench.errors import WrongDtype, WrongNumbers, WrongShape
from sol_bench.inputs import make_inputs
from sol_bench.models import Tolerance
from sol_bench.problem import Problem, load_problem
from sol_bench.reference import load_reference

from ..problems.extract import extract, write_problem
from .package import PACKAGE, op_name

NORM, ATTENTION, MLP, LAYER = "rmsnorm", "attention_block", "mlp_block", "decoder_layer"
STAGES = (NORM, ATTENTION, MLP)

Call = Callable[..., Any]


class BlockError(Exception):
    """The architecture does not cut into the stages of a decoder layer, or the package cannot be loaded."""


@dataclass(frozen=True)
class BlockProblems:
    """The stage problems and the whole-layer problem of one architecture, by cut."""

    stages: Mapping[str, Problem]
    layer: Problem


@dataclass(frozen=True)
class BlockRun:
    """One way of running the layer: which stages used an exported op, its outputs and its latency."""

    exported: tuple[str, ...]
    outputs: torch.Tensor
    latency_ms: float
    kernel_calls: Mapping[str, int] = field(default_factory=dict)  # op -> calls that ran the winner


@dataclass(frozen=True)
class BlockCheck:
    """The layer run from the references and from the exported ops, each compared with the layer's truth."""

    tokens: int
    reference: BlockRun
    exported: BlockRun
    reference_matches: bool
    exported_matches: bool
    exported_max_abs_err: float
    reason: str = ""


def block_problems(
    arch: str, out_dir: Path, overrides: Mapping[str, Any] | None = None, dtype: str | None = None
) -> BlockProblems:
    """Cut ``arch`` into the layer's stages and the whole layer, written under ``out_dir`` and loaded."""
    found: dict[str, Problem] = {}
    for cut in (*STAGES, LAYER):
        drafts = extract(arch, dict(overrides or {}), dtype=dtype, ops=[cut])
        if len(drafts) != 1:
            raise BlockError(f"{arch}: cut {cut!r} gave {len(drafts)} problems, not one")
        found[cut] = load_problem(write_problem(drafts[0], out_dir, overwrite=True))
    return BlockProblems({c: found[c] for c in STAGES}, found[LAYER])


def shared_tokens(problems: BlockProblems) -> list[int]:
    """Token counts every stage and the layer have a workload for (the shapes an exported op may be judged on)."""

    def tokens(p: Problem) -> set[int]:
        return {next(iter(w.axes.values())) for w in p.workloads if len(w.axes) == 1}

    common = tokens(problems.layer)
    for p in problems.stages.values():
        common &= tokens(p)
    return sorted(common)


def reference_calls(problems: BlockProblems) -> dict[str, Call]:
    return {cut: load_reference(p.definition).run for cut, p in problems.stages.items()}


def exported_calls(problems: BlockProblems, package_root: Path) -> tuple[dict[str, Call], dict[str, Any]]:
    """Each stage's exported op where the package has one, else its reference; and the ops' runtimes."""
    if not (package_root / PACKAGE / "__init__.py").is_file():
        raise BlockError(f"{package_root}: no {PACKAGE}/ package (write one with `solforge export -o DIR`)")
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None and Path(loaded.__file__).resolve().parent.parent != package_root.resolve():
        # torch.library keeps one op per name in a process: a second package cannot register over the first
        raise BlockError(f"{PACKAGE} from {Path(loaded.__file__).parent} is already loaded in this process; "
                         f"check {package_root} in a fresh one (bench/model_block.py)")  # fmt: skip
    if str(package_root) not in sys.path:
        sys.path.insert(0, str(package_root))
    package = importlib.import_module(PACKAGE)
    calls, runtimes = reference_calls(problems), {}
    for cut, p in problems.stages.items():
        name = op_name(p.name)
        if name in package.OPS:
            calls[cut] = package.OPS[name]
            runtimes[cut] = getattr(package, name).runtime
    return calls, runtimes


def _scalar(problem: Problem, workload_tokens: int, name: str) -> Any:
    for w in problem.workloads:
        src = w.inputs.get(name)
        if next(iter(w.axes.values())) == workload_tokens and src is not None and src.type == "scalar":
            return src.value
    raise BlockError(f"{problem.path}: no scalar {name!r} on a workload of {workload_tokens} tokens")


def _stage(problem: Problem, call: Call, values: Mapping[str, Any]) -> torch.Tensor:
    missing = [n for n in problem.definition.inputs if n not in values]
    if missing:
        raise BlockError(f"{problem.path}: the layer has no value for inputs {missing}")
    out = call(*(values[n] for n in problem.definition.inputs))
    return out[0] if isinstance(out, (tuple, list)) else out


def run_layer(problems: BlockProblems, calls: Mapping[str, Call], inputs: Mapping[str, Any], tokens: int) -> torch.Tensor:
    """The layer from its stage calls, on the ``decoder_layer`` problem's inputs."""
    norm, attn, mlp = (problems.stages[c] for c in STAGES)
    eps = _scalar(norm, tokens, "eps") if "eps" in norm.definition.inputs else None

    def normed(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return _stage(norm, calls[NORM], {"x": x, "weight": weight, "eps": eps})

    x = inputs["x"]
    h = x + _stage(attn, calls[ATTENTION], {**inputs, "x": normed(x, inputs["attn_norm"])})
    return h + _stage(mlp, calls[MLP], {**inputs, "x": normed(h, inputs["mlp_norm"])})


def _time(fn: Callable[[], Any], device: torch.device, iterations: int) -> float:
    """Median milliseconds of ``fn`` after two warm-up calls (CUDA events on a GPU)."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(iterations):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def check_block(
    problems: BlockProblems, package_root: Path, tokens: int, device: str = "cpu", iterations: int = 20, seed: int = 0
) -> BlockCheck:
    """Run the layer both ways on the ``decoder_layer`` workload of ``tokens`` tokens and compare each with it."""
    layer = problems.layer
    workload = next((w for w in layer.workloads if tokens in w.axes.values()), None)
    if workload is None:
        raise BlockError(f"{layer.path}: no workload of {tokens} tokens")
    dev = torch.device(device)
    ref = load_reference(layer.definition)
    inputs = make_inputs(layer.definition, workload, device, seed=seed, reference=ref)
    with torch.no_grad():
        truth = ref.run(*inputs.values())
        truth = truth[0] if isinstance(truth, (tuple, list)) else truth
        runs = []
        for calls, runtimes in ((reference_calls(problems), {}), exported_calls(problems, package_root)):
            before = {c: rt.calls["kernel"] for c, rt in runtimes.items()}
            out = run_layer(problems, calls, inputs, tokens)
            kernel = {c: rt.calls["kernel"] - before[c] for c, rt in runtimes.items()}
            latency = _time(lambda: run_layer(problems, calls, inputs, tokens), dev, iterations)
            runs.append(BlockRun(tuple(sorted(runtimes)), out, latency, kernel))
    tol = workload.tolerance
    why = {what: _mismatch(r.outputs, truth, tol) for what, r in (("references", runs[0]), ("exported", runs[1]))}
    err = (runs[1].outputs.float() - truth.float()).abs().max().item()
    reason = "; ".join(f"{what}: {w}" for what, w in why.items() if w)
    return BlockCheck(tokens, runs[0], runs[1], not why["references"], not why["exported"], err, reason)


def _mismatch(out: torch.Tensor, truth: torch.Tensor, tol: Tolerance) -> str:
    """Why ``out`` misses the layer's output under its tolerance, or "" (the judge's comparison)."""
    try:
        compare("y", out, truth, tol)
    except (WrongShape, WrongDtype, WrongNumbers) as e:
        return str(e)
    return ""
