"""Reference-derived candidates exported as standalone source: the code Inductor generates, per workload.

The reference is compiled once per distinct input signature of the problem's workloads, in the agent's own
process on the device (never in the judge's), and the module Inductor writes for it becomes a source file of
the candidate: Triton kernels and their launcher on CUDA, C++ kernels on the CPU. At judge time nothing is
traced or lowered; the module only loads its kernels. An entry file keys each call on its input signature
(``replay._signature``) and hands the arguments to the module exported for it, optionally replayed through
a CUDA graph. Export holds only when every workload compiles to one graph whose inputs are the reference's
own arguments and whose exported module reproduces both the compiled function and the eager reference;
otherwise ``NotExportable``.

What the judge's worker does differently from this process, and how the export keeps to it:
- its inputs are fresh, contiguous buffers (the judge copies every input into one), whatever strides or
  storage offsets the problem's custom input function made: the export runs on such copies (``_as_judged``),
  so the signature it keys on and the strides Inductor asserts are the ones the judge passes;
- a Python scalar is baked into the module: a custom input function whose scalars (or shapes) change with
  the seed gives the judge signatures no module was made for, so it is refused here;
- it runs with torch's default precision flags plus whatever the reference's module sets at import (the
  entry does not carry the reference): the export compiles and checks under exactly those flags
  (``judge_precision``), and the entry sets them at import (``_PRECISION``), so cuBLAS calls left in the
  module and Triton GEMMs that baked TF32 in at compile time agree with the judge's reference.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import torch

from sol_bench.correctness import compare
from sol_bench.inputs import make_inputs
from sol_bench.models import Solution
from sol_bench.problem import Problem
from sol_bench.reference import load_reference

from . import compiled, replay
from .compiled import CompileVariant, replay_source
from .entry_solution import entry_solution

_SEED = 5
# a library call inside the launcher: the module then is not Triton alone (cuBLAS through extern_kernels, aten
# fallbacks for ops Inductor does not lower)
_LIBRARY_CALL = re.compile(r"\b(extern_kernels|aten|torch\.ops)(\.\w+)+\s*\(")


VARIANTS: tuple[CompileVariant, ...] = (
    CompileVariant("exported", mode="default", needs_gpu=True),
    CompileVariant("exported_cudagraph", mode="default", cuda_graph=True, needs_gpu=True),
)


def ordered_variants(problem: Problem) -> tuple[CompileVariant, ...]:
    return compiled.ordered_variants(problem, VARIANTS)


def solution_name(problem: Problem, variant: CompileVariant) -> str:
    return f"{problem.name}__ref_{variant.name}"


class NotExportable(Exception):
    """The reference cannot be exported for this problem; the message says which workload and why."""


@dataclass(frozen=True)
class ExportedModule:
    """Inductor's module for one input signature: its source, which arguments its ``call`` takes, in which
    order (indices into the reference's arguments, outputs after inputs when destination-passing), and
    whether the reference returns one tensor."""

    key: tuple[Any, ...]
    source: str
    order: tuple[int, ...]
    single: bool
    outputs: int = 0  # destination-passing: ``call`` writes this many output buffers (the last arguments)
    precision: dict[str, Any] = field(default_factory=lambda: dict(PRECISION_DEFAULTS))  # flags it ran under


def config_patches(variant: CompileVariant) -> dict[str, Any]:
    """The Inductor settings a compile variant stands for (its mode, then its options)."""
    patches: dict[str, Any] = {}
    if variant.mode and variant.mode.startswith("max-autotune"):
        patches["max_autotune"] = True
    patches.update(dict(variant.options))
    return patches


def _load(source: str, directory: Path, stem: str):
    path = directory / f"{stem}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"solforge_export_check_{stem}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _clone(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _as_judged(args: Sequence[Any]) -> list[Any]:
    """Fresh buffers of default strides holding the same values, as the judge passes every input."""
    return [torch.empty(a.shape, dtype=a.dtype, device=a.device).copy_(a) if isinstance(a, torch.Tensor) else a
            for a in args]  # fmt: skip


# Process-wide settings that change what matmuls and convolutions compute; a fresh process has these values.
PRECISION_DEFAULTS: dict[str, Any] = {
    "float32_matmul_precision": "highest",
    "matmul.allow_tf32": False,
    "matmul.allow_bf16_reduced_precision_reduction": True,
    "matmul.allow_fp16_reduced_precision_reduction": True,
    "cudnn.allow_tf32": True,
}


def precision_flags() -> dict[str, Any]:
    m = torch.backends.cuda.matmul
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul.allow_tf32": m.allow_tf32,
        "matmul.allow_bf16_reduced_precision_reduction": m.allow_bf16_reduced_precision_reduction,
        "matmul.allow_fp16_reduced_precision_reduction": m.allow_fp16_reduced_precision_reduction,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
    }


def set_precision_flags(flags: dict[str, Any]) -> None:
    # the precision first: it also sets matmul.allow_tf32, which is then set as recorded
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    m = torch.backends.cuda.matmul
    m.allow_tf32 = flags["matmul.allow_tf32"]
    m.allow_bf16_reduced_precision_reduction = flags["matmul.allow_bf16_reduced_precision_reduction"]
    m.allow_fp16_reduced_precision_reduction = flags["matmul.allow_fp16_reduced_precision_reduction"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]


@contextmanager
def judge_precision(problem: Problem):
    """The precision flags of the judge's process while the block runs (torch's defaults, then the reference's
    module loaded, as the judge loads it); yields the reference and the flags; restores this process's own."""
    saved = precision_flags()
    try:
        set_precision_flags(PRECISION_DEFAULTS)
        ref = load_reference(problem.definition)
        yield ref, precision_flags()
    finally:
        set_precision_flags(saved)


class Disagreement(AssertionError):
    """A ``check`` failure that names what the module was compared with."""

    def __init__(self, against: str, detail: str):
        super().__init__(detail)
        self.against = against


def export_workload(run, args: Sequence[Any], variant: CompileVariant, where: str, check,
                    outputs: int = 0) -> ExportedModule:
    """Compile ``run`` on ``args`` and return Inductor's module for them, checked by ``check(got, want)``.

    ``outputs``: ``run`` is destination-passing (``replay._into``): the last ``outputs`` arguments are buffers
    it writes, which the module's kernels then store into directly; ``got`` and ``want`` are those buffers."""
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    patches = config_patches(variant)
    orders: list[tuple[int, ...]] = []
    refused: list[str] = []
    compile_args = _clone(args)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]):
        # The graph's inputs must be the reference's own arguments (found by identity), so that the exported
        # ``call`` can be fed from the candidate's arguments: a global tensor or a buffer made at import is not.
        order = []
        for ex in example_inputs:
            hit = [i for i, a in enumerate(compile_args) if a is ex]
            if not isinstance(ex, torch.Tensor) or len(hit) != 1:
                refused.append(f"{where}: a graph input ({type(ex).__name__}) is not one of the reference's arguments")
                raise NotExportable(refused[-1])
            order.append(hit[0])
        orders.append(tuple(order))
        return compile_fx(gm, example_inputs, config_patches=patches)

    torch._dynamo.reset()
    try:
        with torch._inductor.config.patch(fx_graph_cache=False), torch.no_grad():
            fn = torch.compile(run, backend=backend, fullgraph=True, dynamic=False)
            want, codes = run_and_get_code(fn, *compile_args)
    except Exception as e:  # graph breaks, lowering failures: the reference stays with torch.compile
        if refused:  # Dynamo wraps what the backend raised
            raise NotExportable(refused[0]) from e
        raise NotExportable(f"{where}: torch.compile failed: {type(e).__name__}: {str(e)[:300]}") from e
    finally:
        torch._dynamo.reset()
    if len(codes) != 1 or len(orders) != 1:
        raise NotExportable(f"{where}: Inductor wrote {len(codes)} modules for {len(orders)} graphs, not one of each")
    if outputs:
        want = tuple(compile_args[len(compile_args) - outputs :])
    single = isinstance(want, torch.Tensor)
    wants = (want,) if single else tuple(want) if isinstance(want, (tuple, list)) else None
    if wants is None or not all(isinstance(w, torch.Tensor) for w in wants):
        raise NotExportable(f"{where}: the reference returns {type(want).__name__}, not tensors")
    source, order = codes[0], orders[0]
    with tempfile.TemporaryDirectory(prefix="solforge-export-") as tmp:
        try:
            module = _load(source, Path(tmp), "exported")
            fresh = _clone(args)
            with torch.no_grad():
                got = tuple(module.call([fresh[i] for i in order]))
            if outputs:
                if got:
                    raise NotExportable(f"{where}: the destination-passing module returns {len(got)} tensors")
                got = tuple(fresh[len(fresh) - outputs :])
        except Exception as e:
            raise NotExportable(f"{where}: the exported module failed: {type(e).__name__}: {e}") from e
    if len(got) != len(wants):
        raise NotExportable(f"{where}: the exported module returns {len(got)} tensors, the reference {len(wants)}")
    try:
        check(got, wants)
    except Exception as e:
        against = e.against if isinstance(e, Disagreement) else "the compiled reference"
        raise NotExportable(f"{where}: the exported module disagrees with {against}: {e}") from e
    return ExportedModule(replay._signature(args), source, order, single, outputs)


def export_problem(
    problem: Problem, device: str, variant: CompileVariant, max_seconds: float = 300.0
) -> tuple[ExportedModule, ...]:
    """One module per distinct input signature of the problem's workloads, on ``device``; destination-passing
    (outputs after the inputs, written in place) for a CUDA-graph variant."""
    with judge_precision(problem) as (ref, flags):
        modules = _export_all(problem, ref, device, variant, max_seconds)
    return tuple(replace(m, precision=flags) for m in modules)


def _tensors(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _export_all(
    problem: Problem, ref, device: str, variant: CompileVariant, max_seconds: float
) -> list[ExportedModule]:
    from sol_bench.inputs import output_specs

    d = problem.definition
    custom = d.custom_inputs_entrypoint is not None
    out: dict[tuple[Any, ...], ExportedModule] = {}
    t0 = time.monotonic()
    for w in problem.workloads:
        where = f"{problem.name} workload {w.uuid}"
        inputs = _as_judged(list(make_inputs(d, w, device, seed=_SEED, reference=ref).values()))
        if custom:  # scalars and shapes are part of the signature: they must not change with the seed
            other = _as_judged(list(make_inputs(d, w, device, seed=_SEED + 1, reference=ref).values()))
            for name, a, b in zip(d.inputs, replay._signature(inputs), replay._signature(other)):
                if a != b:
                    raise NotExportable(f"{where}: input {name!r} changes with the seed ({a} vs {b}); a module "
                                        "exported for one value would not serve the judge's inputs")  # fmt: skip
        args = list(inputs)
        n_out = len(d.outputs) if variant.cuda_graph else 0
        if n_out:
            args += [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in output_specs(d, w).values()]
        if replay._signature(args) in out:
            continue
        if time.monotonic() - t0 > max_seconds:
            raise NotExportable(f"{where}: over the export budget of {max_seconds:.0f} s")
        with torch.no_grad():
            eager = _tensors(ref.run(*_clone(inputs)))

        def check(got, wants, w=w, eager=eager):
            for name, g, e in zip(d.outputs, got, wants):
                compare(name, g, e, w.tolerance)
            for name, g, e in zip(d.outputs, got, eager):
                try:
                    compare(name, g, e, w.tolerance)
                except Exception as err:
                    raise Disagreement("the eager reference", str(err)) from err

        run = replay._into(ref.run, n_out) if n_out else ref.run
        m = export_workload(run, args, variant, where, check, n_out)
        out[m.key] = m
    if not out:
        raise NotExportable(f"{problem.name}: no workloads")
    return list(out.values())


def language(modules: Sequence[ExportedModule]) -> str:
    """``triton`` when every module launches only Triton kernels, else ``pytorch`` (library calls, CPU code)."""

    def launcher(src: str) -> str:
        # the body of ``call`` (a module function, or a method of Inductor's ``Runner`` in newer torch)
        lines = src.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def call(")), None)
        if start is None:
            return ""
        indent = len(lines[start]) - len(lines[start].lstrip())
        body = []
        for ln in lines[start + 1 :]:
            if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
                break
            body.append(ln)
        return "\n".join(body)

    triton_only = all(
        "async_compile.triton(" in m.source and not _LIBRARY_CALL.search(launcher(m.source)) for m in modules
    )
    return "triton" if triton_only else "pytorch"


_ENTRY = '''"""Inductor's code for {problem} ({variant}), exported by solforge: one module per input signature."""

import importlib.util as _importlib_util
from pathlib import Path as _Path

{replay}
# the precision flags the modules were compiled and checked under (the judge's process has them too)
_PRECISION = {precision}
_torch.set_float32_matmul_precision(_PRECISION["float32_matmul_precision"])
for _flag in ("allow_tf32", "allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction"):
    setattr(_torch.backends.cuda.matmul, _flag, _PRECISION["matmul." + _flag])
_torch.backends.cudnn.allow_tf32 = _PRECISION["cudnn.allow_tf32"]

# input signature -> (module file, indices of the arguments its `call` takes, returns one tensor)
_EXPORTED = {table}
_loaded = {{}}


def _module(file):
    module = _loaded.get(file)
    if module is None:
        spec = _importlib_util.spec_from_file_location("solforge_exported_{digest}_" + file[:-3],
                                                       _Path(__file__).with_name(file))
        module = _importlib_util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _loaded[file] = module
    return module


def _exported(*args):
    key = _signature(args)
    entry = _EXPORTED.get(key)
    if entry is None:
        raise RuntimeError(f"no exported module for the input signature {{key}}")
    file, order, single = entry
    out = _module(file).call([args[i] for i in order])
    return out[0] if single else tuple(out)


def solforge_entry(*args):
    {call}
'''


def solution(problem: Problem, modules: Sequence[ExportedModule], variant: CompileVariant) -> Solution:
    files = {f"exported_{i}.py": m for i, m in enumerate(modules)}
    digest = hashlib.sha256("".join(m.source for m in modules).encode()).hexdigest()[:12]
    table = "{\n" + "".join(f"    {m.key!r}: ({f!r}, {m.order!r}, {m.single!r}),\n" for f, m in files.items()) + "}"
    n_out = len(problem.definition.outputs)
    into = all(m.outputs for m in modules)
    precision = modules[0].precision if modules else dict(PRECISION_DEFAULTS)
    if any(m.precision != precision for m in modules):
        raise ValueError("the modules were exported under different precision flags")
    if into and not variant.cuda_graph:
        raise ValueError("destination-passing exports are for the CUDA-graph variant")
    # modules that return their results (an export for the plain variant) get the copy into the outputs
    call = "return _exported(*args)"
    if variant.cuda_graph:
        call = "_graphed(_exported, args)" if into else f"_graphed(_into(_exported, {n_out}), args)"
    entry = _ENTRY.format(
        problem=problem.name, variant=variant.name, replay=replay_source(), table=table, digest=digest, call=call,
        precision=repr(precision),
    )
    return entry_solution(
        problem, name=solution_name(problem, variant), author="solforge-offline-exported",
        description=f"the reference through Inductor, exported as its generated source ({variant.name})",
        language=language(modules), destination_passing=variant.cuda_graph, kernel=entry,
        files={f: m.source for f, m in files.items()},
    )
