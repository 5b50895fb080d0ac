"""Softmax over the last dim.

Reference shape: ops {_softmax, casts} or decomposed {amax|max, sub, exp, sum, div|reciprocal·mul, casts}, one
tensor input shaped like the output. Kernel: one program / CTA per row, fp32 math, the row held in registers;
launcher: grid = rows. Long rows (> 8192 columns in Triton, > 32 × threads in CUDA) are not held in one CTA:
Triton loops over the row; CUDA holds the row in the registers of several CTAs (``resident``: a cluster a row, or
a cooperative grid) or splits it over CTAs in two passes. Softmax is over the last dim only (a reference
softmaxing another dim fails the judge and the agent moves on). The CUDA softmax uses __expf (fast exp), well
within bf16 tolerance.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_CLUSTERS, CUDA_FILE, Binding, Family, Renderer, cuda_module, kernel_source, py_signature,
                   triton_launcher)
from .rows import out_name, single_output_like

_SOFTMAX_CASTS = {"_to_copy", "clone", "contiguous", "copy_", "alias", "detach", "view", "expand"}
# The decomposed spelling: x - amax(x) (or max), exp, sum, divide (or multiply by the reciprocal).
_SOFTMAX_DECOMPOSED = {"amax", "max", "sub", "exp", "sum", "div", "mul", "reciprocal"}


def match_softmax(problem: Problem, sig: OpSignature) -> list[Binding]:
    fused = sig.has("_softmax") and sig.only({"_softmax", *_SOFTMAX_CASTS})
    decomposed = (sig.has("exp", "sum") and sig.has_any("div", "reciprocal")
                  and sig.only(_SOFTMAX_DECOMPOSED | _SOFTMAX_CASTS))  # fmt: skip
    if not (fused or decomposed):
        return []
    found = single_output_like(problem)
    if found is None or len([s for s in problem.definition.inputs.values() if not s.is_scalar]) != 1:
        return []
    return [Binding({"x": found[0]})]


def render_softmax_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""import torch

{py_signature(problem)}
    {out_name(problem)}.copy_(torch.softmax({x}.float(), dim=-1))
"""


# Rows up to SOFTMAX_TRITON_BLOCK columns are held in registers by one program; wider rows are looped over in
# SOFTMAX_TRITON_LOOP_BLOCK-wide chunks (online max / sum of exponentials, then a second pass writing).
SOFTMAX_TRITON_BLOCK = 8192
SOFTMAX_TRITON_LOOP_BLOCK = 4096
_SOFTMAX_TRITON = kernel_source("softmax_triton.py")


def render_softmax_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""{_SOFTMAX_TRITON}
{triton_launcher()}
_row_launch, _loop_launch = _Launcher(_softmax_row), _Launcher(_softmax_row_loop)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols if n_cols else 0
    if rows == 0:
        return
    if n_cols <= {SOFTMAX_TRITON_BLOCK}:
        _row_launch((rows,), {x}, {out_name(problem)}, n_cols, BLOCK=triton.next_power_of_2(n_cols),
                    num_warps={p["num_warps"]})
    else:
        _loop_launch((rows,), {x}, {out_name(problem)}, n_cols, BLOCK={SOFTMAX_TRITON_LOOP_BLOCK},
                     num_warps={p["num_warps"]})
"""


_SOFTMAX_CUDA = kernel_source("softmax.cu")


def render_softmax_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, y, t = b.roles["x"], out_name(problem), p["threads"]
    resident = p.get("resident")
    if resident not in (None, "cluster", "grid"):
        raise ValueError(f"softmax resident: {resident!r} (cluster, grid or None)")
    # a resident variant whose launch is refused falls back to the faster two-pass form (one cooperative launch)
    fused = "true" if p.get("fused", resident is not None) else "false"
    parts = int(p.get("parts", 0)) if resident == "cluster" else 0
    if resident == "cluster" and not 2 <= parts <= 16:
        raise ValueError(f"softmax parts: {parts} CTAs a cluster (2-16)")
    first = (f"if (softmax_resident_row<scalar_t>({x}, xp, yp, rows, n_cols, {t}, {parts}, stream)) {{}}\n      else "
             if resident else "")
    body = f"""  if ({x}.numel() == 0) return;
  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int per_thread = (n_cols + {t} - 1) / {t};
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    auto xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    auto yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    if (per_thread <= 4) softmax_rows<scalar_t, 4><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else if (per_thread <= 8) softmax_rows<scalar_t, 8><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else if (per_thread <= 32) softmax_rows<scalar_t, 32><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else {{
      constexpr int V = 16 / sizeof(scalar_t);
      const bool vec = n_cols % V == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0
                       && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
      {first}if (vec) softmax_long<scalar_t, true>({x}, xp, yp, rows, n_cols, {t}, {fused}, stream);
      else softmax_long<scalar_t, false>({x}, xp, yp, rows, n_cols, {t}, {fused}, stream);
    }}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, CUDA_CLUSTERS + _SOFTMAX_CUDA, body)


SOFTMAX = Family(
    "softmax", match_softmax,
    renderers=(
        Renderer("pytorch", False, {}, render_softmax_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_softmax_triton),
        # the row resident in registers first: a cluster a row (one 128k fp32 row, H200: 16 CTAs of
        # 512 threads 4.9 us, of 1024 5.1, 8 CTAs 5.8-6.0; each slice brought in by cp.async.bulk instead: 5.0,
        # and 11% slower at 333 rows), then a cooperative grid (5.8); then the two-pass kernels (fused: 6.1)
        Renderer("cuda_cpp", True,
                 ({"threads": (512, 1024), "resident": ("cluster",), "parts": (16, 8)},
                  {"threads": (256, 128), "resident": ("grid",)},
                  {"threads": (512, 256, 1024), "fused": (True, False)}),
                 render_softmax_cuda, file=CUDA_FILE),
    ),
)
