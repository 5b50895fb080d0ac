"""Softmax and LayerNorm over the last dim (the other row-wise families; RMSNorm has its own file).

Reference shape: softmax — ops {_softmax, casts}, one tensor input shaped like the output.
LayerNorm — ops {native_layer_norm | var_mean/sub/mean...}, x shaped like the output, optional 1-D weight
and bias, eps a scalar input or a literal.
Kernel: one program / CTA per row, fp32 math, the row held in registers. Launcher: grid = rows.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import CUDA_FILE, Binding, Family, Renderer, cuda_module, eps_literal, py_signature


def _single_output_like(problem: Problem) -> tuple[str, list] | None:
    d = problem.definition
    if len(d.outputs) != 1:
        return None
    out = next(iter(d.outputs.values()))
    xs = [n for n, s in d.inputs.items() if not s.is_scalar and s.shape == out.shape]
    if len(xs) != 1 or not out.shape:
        return None
    return xs[0], out.shape


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


# ---------------------------------------------------------------------------------------------- softmax


def match_softmax(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not sig.has("_softmax") or not sig.only({"_softmax", "_to_copy", "clone", "contiguous"}):
        return []
    found = _single_output_like(problem)
    if found is None or len([s for s in problem.definition.inputs.values() if not s.is_scalar]) != 1:
        return []
    return [Binding({"x": found[0]})]


def render_softmax_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""import torch

{py_signature(problem)}
    {_out(problem)}.copy_(torch.softmax({x}.float(), dim=-1))
"""


def render_softmax_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=m, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=m)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols
    if rows == 0:
        return
    _softmax_row[(rows,)]({x}, {_out(problem)}, n_cols, BLOCK=triton.next_power_of_2(n_cols),
                          num_warps={p["num_warps"]})
"""


_SOFTMAX_CUDA = r"""
template <typename T, int MAX_PER_THREAD>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
  __shared__ float smem[32];
  const long long row = blockIdx.x;
  float v[MAX_PER_THREAD];
  float mx = -INFINITY;
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    v[i] = c < n_cols ? to_f<T>(x[row * n_cols + c]) : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = block_reduce<true>(mx, smem);
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) { v[i] = __expf(v[i] - mx); s += v[i]; }
  const float inv = 1.f / block_reduce<false>(s, smem);
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    if (c < n_cols) y[row * n_cols + c] = from_f<T>(v[i] * inv);
  }
}
"""


def render_softmax_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, y, t = b.roles["x"], _out(problem), p["threads"]
    body = f"""  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  if (rows == 0) return;
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int per_thread = (n_cols + {t} - 1) / {t};
  TORCH_CHECK(per_thread <= 32, "row too long for this template: ", n_cols);
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    auto xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    auto yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    if (per_thread <= 4) softmax_rows<scalar_t, 4><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else if (per_thread <= 8) softmax_rows<scalar_t, 8><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else softmax_rows<scalar_t, 32><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, _SOFTMAX_CUDA, body)


SOFTMAX = Family(
    name="softmax",
    candidates=match_softmax,
    renderers=(
        Renderer("pytorch", False, {}, render_softmax_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_softmax_triton),
        Renderer("cuda_cpp", True, {"threads": (256, 512, 1024)}, render_softmax_cuda, file=CUDA_FILE),
    ),
)

# -------------------------------------------------------------------------------------------- layernorm


def match_layernorm(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not (sig.has("native_layer_norm") or (sig.has_any("var_mean", "var") and sig.has("sub"))):
        return []
    if sig.has_any("mm", "addmm", "bmm", "_softmax"):
        return []
    found = _single_output_like(problem)
    if found is None:
        return []
    x, shape = found
    d = problem.definition
    vecs = [n for n, s in d.inputs.items() if not s.is_scalar and n != x and s.shape == [shape[-1]]]
    others = [n for n, s in d.inputs.items() if not s.is_scalar and n not in (x, *vecs)]
    if others or len(vecs) > 2:
        return []
    roles = {"x": x}
    if vecs:
        roles["weight"] = vecs[0]
    if len(vecs) == 2:
        roles["bias"] = vecs[1]
    scalars = [n for n, s in d.inputs.items() if s.is_scalar]
    consts: dict[str, Any] = {}
    if len(scalars) == 1:
        roles["eps"] = scalars[0]
    elif not scalars:
        consts["eps"] = eps_literal(d.reference) or 1e-5
    else:
        return []
    return [Binding(roles, consts)]


def _eps(b: Binding) -> str:
    return b.roles.get("eps") or repr(b.consts["eps"])


def render_layernorm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    wf = f"{w}.float()" if w else "None"
    bf = f"{bias}.float()" if bias else "None"
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_(F.layer_norm({x}.float(), ({x}.shape[-1],), {wf}, {bf}, {_eps(b)}))
"""


def render_layernorm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    w_line = "n = n * tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)" if w else ""
    b_line = "n = n + tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)" if bias else ""
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    xv = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(xv, axis=0) / n_cols
    xc = tl.where(m, xv - mean, 0.0)
    n = xc * tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    {w_line}
    {b_line}
    tl.store(y_ptr + row * n_cols + cols, n.to(y_ptr.dtype.element_ty), mask=m)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols
    if rows == 0:
        return
    _layernorm_row[(rows,)]({x}, {w or x}, {bias or x}, {_out(problem)}, n_cols, float({_eps(b)}),
                            BLOCK=triton.next_power_of_2(n_cols), num_warps={p["num_warps"]})
"""


LAYERNORM = Family(
    name="layernorm",
    candidates=match_layernorm,
    renderers=(
        Renderer("pytorch", False, {}, render_layernorm_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_layernorm_triton),
    ),
)

# Notes: softmax is over the last dim only (a reference softmaxing another dim fails the judge and the
# agent moves on). The CUDA softmax uses __expf (fast exp), well within bf16 tolerance.
