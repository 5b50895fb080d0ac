"""Element-wise activations, gated or not: y = act(gate) * up (SwiGLU, GeGLU, ...) or y = act(x).

Activations (``act``): ``silu`` x·σ(x), ``gelu`` exact (erf), ``gelu_tanh`` (tanh approximation),
``gelu_quick`` x·σ(1.702x).
Reference shape: ops {silu|gelu|sigmoid|tanh|erf, mul, add, casts, slices/splits}; either two inputs shaped
like the output (gate and up), one input whose last dim is twice the output's (the two halves), or one
input shaped like the output (no gate). Every activation × role assignment is a candidate; the probe keeps
the ones the reference computes. Kernel: a flat 1-D grid of BLOCK-element programs, fp32 math.
Launcher: grid = cdiv(numel(out), BLOCK). Notes at the bottom.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_FILE, Binding, Family, Renderer, cuda_module, kernel_source, py_signature,
                   triton_launcher)

_ALLOWED = {"silu", "gelu", "sigmoid", "tanh", "erf", "mul", "add", "pow", "div", "rsub", "_to_copy", "slice",
            "split", "split_with_sizes", "chunk", "view", "clone", "alias", "unbind", "select", "narrow",
            "contiguous"}  # fmt: skip
# op -> the activations it hints at, most likely first
_HINTS = {"tanh": ("gelu_tanh",), "erf": ("gelu",), "gelu": ("gelu", "gelu_tanh"), "silu": ("silu",),
          "sigmoid": ("silu", "gelu_quick")}  # fmt: skip

# act -> expression of ``v`` (fp32) in torch, Triton and CUDA
ACTS: dict[str, tuple[str, str, str]] = {
    "silu": ("F.silu(v)", "v * tl.sigmoid(v)", "v / (1.f + __expf(-v))"),
    "gelu": ("F.gelu(v)", "0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))",
             "0.5f * v * (1.f + erff(v * 0.70710678118654752f))"),
    # tanh(z) = 2σ(2z) - 1: Triton has no portable tanh across versions
    "gelu_tanh": ("F.gelu(v, approximate='tanh')",
                  "v * tl.sigmoid(1.5957691216057308 * (v + 0.044715 * v * v * v))",
                  "0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))"),
    "gelu_quick": ("v * torch.sigmoid(1.702 * v)", "v * tl.sigmoid(1.702 * v)", "v / (1.f + __expf(-1.702f * v))"),
}  # fmt: skip
# Triton for 16-bit outputs with ``fast``: the same forms through tanh.approx.f32 (inline PTX). The element-wise
# ladder (bench/memory_floor.py --ladder, 1.18M bf16 elements, 32-bit offsets): copy 2.42 us, gelu_tanh
# through sigmoid 2.66, through tanh.approx 2.46; judged in this template the two tied (2.7 us; gelu_quick
# 2.5 vs 2.6). Triton's CPU interpreter has no inline assembly: there the kernel takes the accurate forms.
TRITON_FAST_ACTS: dict[str, str] = {
    "silu": "v * (0.5 + 0.5 * _tanh_approx(0.5 * v))",
    "gelu": ACTS["gelu"][1],  # no fast form: `fast` renders the accurate kernel, which the planner drops as a repeat
    "gelu_tanh": "0.5 * v * (1.0 + _tanh_approx(0.7978845608028654 * (v + 0.044715 * v * v * v)))",
    "gelu_quick": "v * (0.5 + 0.5 * _tanh_approx(0.851 * v))",
}
# CUDA for 16-bit outputs: tanh.approx.f32 (one MUFU op, relative error ~2^-11, under a bf16 rounding step)
# in place of tanhf, expf and the IEEE division; sigmoid(x) = 0.5 + 0.5 tanh(x / 2). fp32 outputs keep the
# accurate forms above. Fewer instructions, but no faster on the H200 (gelu_tanh and gelu_quick
# stayed at 2.7-2.9 us): these kernels wait on memory, not on issue slots.
CUDA_FAST_ACTS: dict[str, str] = {
    "silu": "v * sigmoid_fast(v)",
    "gelu": ACTS["gelu"][2],
    "gelu_tanh": "0.5f * v * (1.f + tanh_fast(0.7978845608028654f * (v + 0.044715f * v * v * v)))",
    "gelu_quick": "v * sigmoid_fast(1.702f * v)",
}


def match(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not (sig.has_any(*_HINTS) and sig.only(_ALLOWED)):
        return []
    d = problem.definition
    if len(d.outputs) != 1:
        return []
    out = next(iter(d.outputs.values()))
    tensors = [n for n, s in d.inputs.items() if not s.is_scalar]
    if len(tensors) != len(d.inputs) or not out.shape:
        return []
    shapes = [d.inputs[n].shape for n in tensors]
    structures: list[tuple[dict[str, str], dict[str, Any]]] = []
    if len(tensors) == 2 and all(s == out.shape for s in shapes):
        a, b = tensors
        structures = [({"gate": a, "up": b}, {"halves": False}), ({"gate": b, "up": a}, {"halves": False})]
    elif len(tensors) == 1 and shapes[0] == out.shape:
        structures = [({"x": tensors[0]}, {"halves": False, "gated": False})]
    elif len(tensors) == 1 and shapes[0][:-1] == out.shape[:-1]:
        x = tensors[0]
        structures = [({"x": x}, {"halves": True, "gate_first": True}),
                      ({"x": x}, {"halves": True, "gate_first": False})]  # fmt: skip
    hinted = [a for op in _HINTS if sig.has(op) for a in _HINTS[op]]
    acts = list(dict.fromkeys([*hinted, *ACTS]))
    return [Binding(roles, {"act": act, "gated": True, **consts}) for roles, consts in structures for act in acts]


def one_act_per_structure(bindings: list[Binding]) -> list[Binding]:
    """Exact and tanh GELU agree within most tolerances: keep the first (best-hinted) passing activation."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for b in bindings:
        key = (tuple(sorted(b.roles.items())), *(v for k, v in sorted(b.consts.items()) if k != "act"))
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def _gated(b: Binding) -> bool:
    return bool(b.consts.get("gated", True))


def _operands(b: Binding) -> tuple[str, str | None]:
    """Python expressions for gate (the activation's input) and up (None without a gate; views, no copies)."""
    if not _gated(b):
        return b.roles["x"], None
    if not b.consts["halves"]:
        return b.roles["gate"], b.roles["up"]
    x = b.roles["x"]
    first, second = f"{x}[..., : {x}.shape[-1] // 2]", f"{x}[..., {x}.shape[-1] // 2 :]"
    return (first, second) if b.consts["gate_first"] else (second, first)


def render_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    gate, up = _operands(b)
    times_up = f" * {up}.float()" if up is not None else ""
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    v = {gate}.float()
    {_out(problem)}.copy_({ACTS[b.consts["act"]][0]}{times_up})
"""


def render_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    y = _out(problem)
    if not _gated(b):
        x = b.roles["x"]
        args, setup = f"{x}, {x}", f"half = {y}.shape[-1]\n    in_cols, g_off, u_off = half, 0, 0"
    elif b.consts["halves"]:
        x = b.roles["x"]
        g_off, u_off = ("0", "half") if b.consts["gate_first"] else ("half", "0")
        args, setup = f"{x}, {x}", f"half = {x}.shape[-1] // 2\n    in_cols, g_off, u_off = 2 * half, {g_off}, {u_off}"
    else:
        args, setup = f"{b.roles['gate']}, {b.roles['up']}", f"half = {y}.shape[-1]\n    in_cols, g_off, u_off = half, 0, 0"
    act = b.consts["act"]
    return f"""import os

import torch
import triton
import triton.language as tl

_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _tanh_approx(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _act(v, FAST: tl.constexpr):
    if FAST:
        return {TRITON_FAST_ACTS[act]}
    return {ACTS[act][1]}


# Gated: one row per program along grid axis 0 and column blocks along axis 1; plain: a flat index. Neither
# divides an element index by the row length: a per-element 64-bit division, and addresses the compiler
# could not prove contiguous (no 16-byte vector loads), kept the earlier flat kernel at 0.82-0.89x T_b.
@triton.jit
def _act_mul(g_ptr, u_ptr, y_ptr, n, half, in_cols, g_off, u_off, GATED: tl.constexpr, BLOCK: tl.constexpr,
             FAST: tl.constexpr):
    if GATED:
        row = tl.program_id(0).to(tl.int64)
        col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = col < half
        v = tl.load(g_ptr + row * in_cols + g_off + col, mask=m, other=0.0).to(tl.float32)
        up = tl.load(u_ptr + row * in_cols + u_off + col, mask=m, other=0.0).to(tl.float32)
        r = _act(v, FAST) * up
        tl.store(y_ptr + row * half + col, r.to(y_ptr.dtype.element_ty), mask=m)
    else:
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        v = tl.load(g_ptr + i, mask=m, other=0.0).to(tl.float32)
        r = _act(v, FAST)
        tl.store(y_ptr + i, r.to(y_ptr.dtype.element_ty), mask=m)

{triton_launcher()}
_act_mul_launch = _Launcher(_act_mul)


{py_signature(problem)}
    {setup}
    n = {y}.numel()
    if n == 0:
        return
    BLOCK = {p["block"]}
    grid = (n // half, triton.cdiv(half, BLOCK)) if {_gated(b)} else (triton.cdiv(n, BLOCK),)
    fast = {p["fast"] and TRITON_FAST_ACTS[act] != ACTS[act][1]} and {y}.element_size() == 2 and not _INTERPRETED
    _act_mul_launch(grid, {args}, {y}, n, half, in_cols, g_off, u_off, GATED={_gated(b)},
                    BLOCK=BLOCK, FAST=fast, num_warps={p["num_warps"]})
"""


CUDA_FAST_MATH = r"""
__device__ __forceinline__ float tanh_fast(float x) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float sigmoid_fast(float x) { return fmaf(0.5f, tanh_fast(0.5f * x), 0.5f); }
"""

# act_vec: U 16-byte vectors per thread, all loaded before any is computed (a one-wave launch with every
# load in flight at once, rather than act_mul's grid-stride loop of one load per trip); the host checks
# that a row holds whole vectors and that every base is 16-byte aligned. Vector j of a block is
# blockIdx.x * blockDim.x * U + j * blockDim.x + threadIdx.x: consecutive threads, consecutive vectors.
# act_mul: the scalar fallback (any alignment), a grid-stride loop; the gated case divides once per element.
CUDA_KERNELS = kernel_source("elementwise.cu")


def cuda_kernels(act: str) -> str:
    """The device code for ``act``: fast-math helpers, then both kernels with the activation in place."""
    return CUDA_FAST_MATH + CUDA_KERNELS.replace("FAST_EXPR", CUDA_FAST_ACTS[act]).replace("ACT_EXPR", ACTS[act][2])


def render_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    y, t, u = _out(problem), p["threads"], p["vectors"]
    if not _gated(b):
        g_ptr = u_ptr = b.roles["x"]
        offs = "0, 0"
        setup = f"const long long sf_half = {y}.size(-1), sf_in_cols = sf_half;"
    elif b.consts["halves"]:
        x = b.roles["x"]
        g_ptr = u_ptr = x
        offs = "0, sf_half" if b.consts["gate_first"] else "sf_half, 0"
        setup = f"const long long sf_half = {x}.size(-1) / 2, sf_in_cols = 2 * sf_half;"
    else:
        g_ptr, u_ptr = b.roles["gate"], b.roles["up"]
        offs = "0, 0"
        setup = f"const long long sf_half = {y}.size(-1), sf_in_cols = sf_half;"
    gated = "true" if _gated(b) else "false"
    # locals carry an sf_ prefix: the parameters of run are the problem's own names (a SwiGLU's "up", say)
    body = f"""  {setup}
  const long long sf_n = {y}.numel();
  if (sf_n == 0) return;
  auto sf_stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({y}.scalar_type(), scalar_t, {{
    const auto* sf_g = reinterpret_cast<const scalar_t*>({g_ptr}.data_ptr());
    const auto* sf_u = reinterpret_cast<const scalar_t*>({u_ptr}.data_ptr());
    auto* sf_y = reinterpret_cast<scalar_t*>({y}.data_ptr());
    const long long sf_e = 16 / (long long)sizeof(scalar_t);
    const bool sf_vec = sf_half % sf_e == 0 && sf_in_cols % sf_e == 0 && reinterpret_cast<uintptr_t>(sf_g) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(sf_u) % 16 == 0 && reinterpret_cast<uintptr_t>(sf_y) % 16 == 0;
    if (sf_vec) {{
      const long long sf_nv = sf_n / sf_e, sf_per_block = {t}LL * {u};
      act_vec<scalar_t, {gated}, {u}><<<(unsigned)((sf_nv + sf_per_block - 1) / sf_per_block), {t}, 0, sf_stream>>>(
          sf_g, sf_u, sf_y, sf_nv, sf_half / sf_e, sf_in_cols, {offs});
    }} else {{
      const int sf_blocks = (int)std::min<long long>((sf_n + {t} - 1) / {t}, 4LL * sm_count() * (2048 / {t}));
      act_mul<scalar_t, {gated}><<<sf_blocks, {t}, 0, sf_stream>>>(sf_g, sf_u, sf_y, sf_n, sf_half, sf_in_cols, {offs});
    }}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, cuda_kernels(b.consts["act"]), body)


FAMILY = Family(
    "elementwise", match,
    prune=one_act_per_structure,
    renderers=(
        Renderer("pytorch", False, {}, render_pytorch),
        Renderer("triton", True, {"block": (1024, 2048, 4096, 512), "num_warps": (4, 8, 2), "fast": (False, True)},
                 render_triton),
        # Measured on the H200: four vectors a thread read 2.7-2.9 us on gelu_tanh/gelu_quick, behind Triton's 2.6-2.7;
        # on a 14336-element SwiGLU (a few CTAs) 3.5 us against 1.4: one vector a thread is the other point.
        Renderer("cuda_cpp", True, {"vectors": (4, 1), "threads": (256, 128)}, render_cuda, file=CUDA_FILE),
    ),
)

# Notes: which half (or which input) is the gate, and which activation, are not visible in the op list
# reliably (a hand-written GELU is mul/add/tanh), so every combination is a candidate and the probe keeps
# the one that reproduces the reference. Memory-bound: the target is bytes(in + out) / bandwidth.
