"""What a template is: a matcher over the reference's ops and shapes, and renderers per language."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from sol_bench.models import Solution
from sol_bench.problem import Problem

from ..compiled import replay_source
from ..graph import OpSignature
from .probe import Probe, run_rendered

FLOAT_SCALARS = ("float32", "float64", "float16", "bfloat16")

# Kernel sources (CUDA, and the Triton and Python text the renderers splice into a rendered file) live as files
# in ``kernels/``; a file may hold placeholders its renderer replaces.
KERNELS_DIR = Path(__file__).parent / "kernels"


def kernel_source(name: str) -> str:
    """The exact text of ``kernels/<name>``."""
    path = KERNELS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"template kernel file {path} is missing")
    return path.read_text(encoding="utf-8")


def set_constant(src: str, file: str, name: str, value: Any) -> str:
    """``src`` (the kernel file ``file``) with its one top-level line ``NAME = ...`` set to ``value``: how a
    rendered Python kernel file (CuTe DSL) takes its compile-time parameters."""
    lines = src.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(f"{name} = ")]
    if len(at) != 1:
        raise ValueError(f"{file} must set {name} on exactly one top-level line, found {len(at)}")
    lines[at[0]] = f"{name} = {value!r}"
    return "\n".join(lines)


@dataclass(frozen=True)
class Binding:
    """Which definition input plays which role, plus constants read from the reference."""

    roles: Mapping[str, str]  # role -> input name
    consts: Mapping[str, Any] = field(default_factory=dict)


# What a renderer writes: the text of ``Renderer.file``, or several files (path -> text) among them ``file``.
Rendered = str | Mapping[str, str]


@dataclass(frozen=True)
class Renderer:
    """One language of one family: a parameter grid and a function that writes the source(s).

    ``file`` holds the entry point ``run``; a renderer returning a mapping writes further files next to it
    (the CUDA templates: ``kernel.cu`` and its pybind ``binding.cpp``).
    """

    language: str
    needs_gpu: bool
    # one parameter grid, or several (kernels with different knobs): their variants in order
    grid: Mapping[str, tuple[Any, ...]] | tuple[Mapping[str, tuple[Any, ...]], ...]
    render: Callable[[Problem, Binding, Mapping[str, Any]], Rendered]
    file: str = "kernel.py"
    accepts: Callable[[Binding], bool] = lambda b: True  # a binding this language cannot handle (head dim, ...)
    keep: Callable[[Mapping[str, Any]], bool] = lambda p: True  # drops grid points that do not make a kernel

    def variants(self) -> list[dict[str, Any]]:
        grids = (self.grid,) if isinstance(self.grid, Mapping) else self.grid
        every = (dict(zip(g, vals)) for g in grids for vals in itertools.product(*g.values()))
        return [p for p in every if self.keep(p)]

    def sources(self, problem: Problem, b: Binding, params: Mapping[str, Any]) -> dict[str, str]:
        """Every file of one rendering, path -> text, the entry file first."""
        out = self.render(problem, b, params)
        if isinstance(out, str):
            return {self.file: out}
        if self.file not in out:
            raise ValueError(f"renderer for {self.language} wrote {sorted(out)}, not its entry file {self.file}")
        return {self.file: out[self.file], **{k: v for k, v in out.items() if k != self.file}}


# A plain-torch model of what a binding claims the reference computes: (problem, binding, inputs) -> outputs.
Semantics = Callable[[Problem, Binding, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Family:
    """``candidates`` reads the op list and shapes (cheap, may over-propose); ``match`` keeps the probed ones.

    A candidate is checked with ``semantics`` when given, else by running the family's PyTorch renderer
    (any of its variants); ``prune`` then thins the survivors (e.g. equivalent candidates).
    """

    name: str
    candidates: Callable[[Problem, OpSignature], list[Binding]]
    renderers: tuple[Renderer, ...]
    semantics: Semantics | None = None
    prune: Callable[[list[Binding]], list[Binding]] | None = None

    def match(self, problem: Problem, sig: OpSignature, probe: Probe | None = None) -> list[Binding]:
        """The bindings whose semantics reproduce the reference on the CPU (``probe``: shared per problem)."""
        cands = self.candidates(problem, sig)
        if not cands:
            return []
        probe = probe if probe is not None else Probe(problem)
        if not probe.cases:
            return []  # not probeable (too big, or no CPU run): no binding rather than a guess
        if self.semantics is not None:
            model = self.semantics
            kept = [b for b in cands if probe.reproduces(lambda c, b=b: model(problem, b, c.inputs))]
        else:
            r = next((r for r in self.renderers if r.language == "pytorch"), None)
            kept = [b for b in cands if r is not None and _renderer_reproduces(problem, r, b, probe)]
        return self.prune(kept) if self.prune is not None and kept else kept


def _renderer_reproduces(problem: Problem, r: Renderer, b: Binding, probe: Probe) -> bool:
    def run(c: Any, params: Mapping[str, Any]) -> Any:
        return run_rendered(problem, r.sources(problem, b, params)[r.file], c)

    return any(probe.reproduces(lambda c, params=params: run(c, params)) for params in r.variants())


def py_signature(problem: Problem) -> str:
    d = problem.definition
    return f"def run({', '.join([*d.inputs, *d.outputs])}):"


_CPP_SCALAR = {"bool": "bool", "int64": "int64_t", "int32": "int64_t", "int16": "int64_t", "int8": "int64_t"}


def cpp_signature(problem: Problem) -> str:
    d = problem.definition
    params = []
    for name, spec in d.inputs.items():
        params.append(f"{_CPP_SCALAR.get(spec.dtype, 'double')} {name}" if spec.is_scalar else f"at::Tensor {name}")
    params += [f"at::Tensor {name}" for name in d.outputs]
    return f"void run({', '.join(params)})"


def scalar_or_const(problem: Problem, name: str | None, value: float | None) -> str:
    """The expression for a role that is a scalar input or a constant found in the reference."""
    return name if name is not None else repr(value)


_FLOAT_LITERAL = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?[eE]-\d+)")


def eps_literal(reference: str) -> float | None:
    """A small float literal written in scientific notation (the usual spelling of eps), if exactly one."""
    found = {float(m) for m in _FLOAT_LITERAL.findall(reference)}
    return found.pop() if len(found) == 1 else None


def build_solution(problem: Problem, family: str, r: Renderer, b: Binding, params: Mapping[str, Any]) -> Solution:
    tag = "_".join(f"{k}{v}" for k, v in params.items())
    name = f"{problem.name}__{family}_{r.language}" + (f"_{tag}" if tag else "")
    return Solution.model_validate({
        "name": name,
        "definition": problem.name,
        "author": "solforge-offline-templates",
        "description": f"{family} template ({r.language}) with {dict(params)}",
        "spec": {"languages": [r.language], "entry_point": f"{r.file}::run", "destination_passing_style": True},
        "sources": [{"path": path, "content": text} for path, text in r.sources(problem, b, params).items()],
    })  # fmt: skip


# The CUDA templates are two translation units, which the judge's ninja builds in parallel: ``kernel.cu``
# (nvcc) holds the kernels and the host ``run`` and includes only light ATen/c10 headers (at::Tensor, the
# current stream, TORCH_CHECK); ``binding.cpp`` (the host compiler) holds the pybind module. nvcc parsing
# <torch/extension.h> (pybind11 and the whole torch API) was most of a one-file build: 95-117 s on a 2-core
# CPU box, against 12-15 s (nvcc, kernel.cu) and 9-13 s (g++, binding.cpp), 10-11 s wall for the two at once.
CUDA_PREAMBLE = kernel_source("cuda_preamble.cuh")


CUDA_FILE, BINDING_FILE = "kernel.cu", "binding.cpp"


# Arrival counters for kernels whose last CTA to arrive finishes the work in the same launch (decode attention's
# split merge, split GEMV's slice sum): zeroed when allocated (or grown), and every launch leaves them zero
# again, so no memset runs per call. A workspace, not a cache: nothing of one call's data survives into the
# next. Held for the life of the process (never freed at exit, when the CUDA context may already be gone), one
# set per device and per module. Calls running at once on two streams of one device would share them: the
# templates assume one stream at a time per device, as the judge calls them.
CUDA_ARRIVAL_COUNTERS = kernel_source("arrival_counters.cuh")


# Thread-block clusters (sm_90): one launch in clusters along x, and reads of a peer CTA's shared memory
# (distributed shared memory, inline PTX: mapa, then ld.shared::cluster at the mapped address). For the kernels
# whose CTAs exchange partials in a cluster (softmax rows, decode attention's KV splits).
CUDA_CLUSTERS = kernel_source("clusters.cuh")


def cuda_module(problem: Problem, kernels: str, body: str) -> dict[str, str]:
    """``kernel.cu`` (kernels and the host ``run`` with ``body``) and ``binding.cpp`` (its pybind module)."""
    sig = cpp_signature(problem)
    kernel = f"{CUDA_PREAMBLE}\n{kernels}\n{sig} {{\n{body}\n}}\n"
    binding = (
        "#include <torch/csrc/utils/pybind.h>\n\n"
        f"// Defined in {CUDA_FILE}, which nvcc compiles without the torch extension headers.\n"
        f"{sig};\n\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }\n'
    )
    return {CUDA_FILE: kernel, BINDING_FILE: binding}


# Arrival counters for Triton files whose programs count themselves in (the last to arrive finishes a tile):
# int32 zeros per device, at least ``n``, that every launch leaves at zero again.
TRITON_ARRIVAL_COUNTERS = kernel_source("arrival_counters.py")


# Programmatic dependent launch (sm_90), for the Triton files of several kernels: a kernel launched with
# ``launch_pdl=True`` may be scheduled while the kernel before it on the stream is still running (a CUDA graph
# keeps the edge), which hides the launch gap between them. ``TRITON_GDC_ENTRY``, first in a kernel's body,
# holds its programs until the previous kernel has finished and its writes are visible (``gdc_wait``), then
# lets the next kernel be scheduled in turn. Each kernel takes ``TRITON_GDC_PARAM`` (off by default, so a
# launch without it is unchanged); the interpreter has neither instruction, so ``_gdc_ready`` turns it on only
# for CUDA tensors on sm_90 and newer.
TRITON_GDC_PARAM = "GDC: tl.constexpr = False"
TRITON_GDC_ENTRY = """if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()"""
TRITON_GDC_READY = """

def _gdc_ready(t):
    return t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9
"""


def triton_gdc(p: Mapping[str, Any], tensor: str) -> tuple[str, str]:
    """For a file whose params ask for ``pdl``: the keyword arguments each launch adds, and the line of ``run``
    that turns them on for ``tensor``'s device (the file must include ``TRITON_GDC_READY``); else nothing."""
    if not p.get("pdl"):
        return "", "# each launch waits for the one before it"
    return ", GDC=gdc, launch_pdl=gdc", f"gdc = _gdc_ready({tensor})"


# Triton's JIT launch (argument binding, specialization keys, cache lookup, stream and device queries) costs
# 25-100 µs of host time per call on the H200 machine (bench/launch_profile.py, 2026-11-30), and the judge's
# window counts host time beyond its short pre-roll. Rendered Triton sources therefore wrap each kernel in
# ``_Launcher``: the first call of a specialization goes through the JIT (compiling if needed) and keeps the
# compiled kernel's C launcher; later calls with the same specialization call that launcher directly on the
# current stream, as Inductor's generated code does. The key holds what Triton specializes on (tensor dtype,
# device and 16-byte alignment, scalar values, constexprs, grid), so a call never reuses a kernel compiled for
# other arguments. Under the CPU interpreter, and for CPU tensors, every call takes the JIT path.
TRITON_LAUNCHER = kernel_source("triton_launcher.py")


# A rendered Triton file of several launches can replay them as one CUDA graph: each launch from Python costs
# host time, and between a call's first and last GPU activity that time is counted. ``replay._replay_graph``
# (its text appended to the file) keys the graph by every argument's buffer, so it only ever replays on the
# very buffers it was captured on; one warm-up call compiles and fills ``_Launcher``'s caches outside the
# capture. Off CUDA it calls straight through.
TRITON_GRAPH_RUN = """

def run(*args):
    _replay_graph(lambda: _run_once(*args), args, warmups=1)
"""


def graph_replayed(source: str) -> str:
    """A rendered Triton file whose ``run`` replays its launches as one CUDA graph (see ``TRITON_GRAPH_RUN``)."""
    if source.count("\ndef run(") != 1:
        raise ValueError("graph_replayed needs exactly one top-level `def run(` in the rendered source")
    return source.replace("\ndef run(", "\ndef _run_once(") + "\n\n" + replay_source() + TRITON_GRAPH_RUN


def triton_launcher() -> str:
    """Source of ``_Launcher`` for a rendered Triton file (it needs ``torch`` imported there)."""
    return "import inspect as _inspect\n" + TRITON_LAUNCHER
