"""Gated element-wise chains: SwiGLU, y = silu(gate) * up (two inputs, or the two halves of one input).

Reference shape: ops {silu, mul, casts, slices/splits}; either two inputs shaped like the output, or one
input whose last dim is twice the output's. Kernel: a flat 1-D grid of BLOCK-element programs, fp32 math.
Launcher: grid = cdiv(numel(out), BLOCK). Notes at the bottom.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import Binding, Family, Renderer, cuda_module, py_signature

_ALLOWED = {"silu", "mul", "_to_copy", "slice", "split", "split_with_sizes", "chunk", "view", "clone",
            "alias", "unbind", "select", "narrow", "contiguous", "sigmoid"}  # fmt: skip


def match(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not (sig.has_any("silu", "sigmoid") and sig.has("mul") and sig.only(_ALLOWED)):
        return []
    d = problem.definition
    if len(d.outputs) != 1:
        return []
    out = next(iter(d.outputs.values()))
    tensors = [n for n, s in d.inputs.items() if not s.is_scalar]
    if len(tensors) == 2 and all(d.inputs[n].shape == out.shape for n in tensors):
        a, b = tensors
        return [Binding({"gate": a, "up": b}, {"halves": False}), Binding({"gate": b, "up": a}, {"halves": False})]
    if len(tensors) == 1 and out.shape and d.inputs[tensors[0]].shape[:-1] == out.shape[:-1]:
        x = tensors[0]
        return [Binding({"x": x}, {"halves": True, "gate_first": True}),
                Binding({"x": x}, {"halves": True, "gate_first": False})]  # fmt: skip
    return []


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def _operands(b: Binding) -> tuple[str, str]:
    """Python expressions for gate and up (views; no copies)."""
    if not b.consts["halves"]:
        return b.roles["gate"], b.roles["up"]
    x = b.roles["x"]
    first, second = f"{x}[..., : {x}.shape[-1] // 2]", f"{x}[..., {x}.shape[-1] // 2 :]"
    return (first, second) if b.consts["gate_first"] else (second, first)


def render_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    gate, up = _operands(b)
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_(F.silu({gate}.float()) * {up}.float())
"""


def render_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    y = _out(problem)
    if b.consts["halves"]:
        x = b.roles["x"]
        g_off, u_off = ("0", "half") if b.consts["gate_first"] else ("half", "0")
        args, setup = f"{x}, {x}", f"half = {x}.shape[-1] // 2\n    in_cols, g_off, u_off = 2 * half, {g_off}, {u_off}"
    else:
        args, setup = f"{b.roles['gate']}, {b.roles['up']}", f"half = {y}.shape[-1]\n    in_cols, g_off, u_off = half, 0, 0"
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu(g_ptr, u_ptr, y_ptr, n, half, in_cols, g_off, u_off, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    row, col = i // half, i % half
    g = tl.load(g_ptr + row * in_cols + g_off + col, mask=m, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * in_cols + u_off + col, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + i, (g * tl.sigmoid(g) * u).to(y_ptr.dtype.element_ty), mask=m)


{py_signature(problem)}
    {setup}
    n = {y}.numel()
    if n == 0:
        return
    BLOCK = {p["block"]}
    _swiglu[(triton.cdiv(n, BLOCK),)]({args}, {y}, n, half, in_cols, g_off, u_off, BLOCK=BLOCK,
                                      num_warps={p["num_warps"]})
"""


_CUDA = r"""
template <typename T>
__global__ void swiglu(const T* __restrict__ g, const T* __restrict__ u, T* __restrict__ y, long long n,
                       long long half, long long in_cols, long long g_off, long long u_off) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / half, col = i - row * half;
    const float gv = to_f<T>(g[row * in_cols + g_off + col]);
    const float uv = to_f<T>(u[row * in_cols + u_off + col]);
    y[i] = from_f<T>(gv / (1.f + __expf(-gv)) * uv);
  }
}
"""


def render_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    y, t = _out(problem), p["threads"]
    if b.consts["halves"]:
        x = b.roles["x"]
        g_ptr = u_ptr = x
        offs = "0, half" if b.consts["gate_first"] else "half, 0"
        setup = f"const long long half = {x}.size(-1) / 2, in_cols = 2 * half;"
    else:
        g_ptr, u_ptr = b.roles["gate"], b.roles["up"]
        offs = "0, 0"
        setup = f"const long long half = {y}.size(-1), in_cols = half;"
    body = f"""  {setup}
  const long long n = {y}.numel();
  if (n == 0) return;
  const int blocks = (int)std::min<long long>((n + {t} - 1) / {t}, 132LL * {p["waves"]} * (2048 / {t}));
  auto stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({y}.scalar_type(), scalar_t, {{
    swiglu<scalar_t><<<blocks, {t}, 0, stream>>>(
        reinterpret_cast<const scalar_t*>({g_ptr}.data_ptr()), reinterpret_cast<const scalar_t*>({u_ptr}.data_ptr()),
        reinterpret_cast<scalar_t*>({y}.data_ptr()), n, half, in_cols, {offs});
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, _CUDA, body)


FAMILY = Family(
    name="swiglu",
    match=match,
    renderers=(
        Renderer("pytorch", False, {}, render_pytorch),
        Renderer("triton", True, {"block": (1024, 4096), "num_warps": (4, 8)}, render_triton),
        Renderer("cuda_cpp", True, {"threads": (256, 512), "waves": (1, 4)}, render_cuda, file="kernel.cu"),
    ),
)

# Notes: which half (or which input) is the gate is not visible in the op list, so both bindings are
# proposed and the judge keeps the right one. Memory-bound: the target is bytes(in + out) / bandwidth.
