"""RMSNorm over the last dim: y = x * rsqrt(mean(x^2) + eps) [* weight, or * (1 + weight): unit offset].

Reference shape: ops {pow|mul, mean|sum, add, rsqrt, mul, casts}, one input shaped like the output,
an optional 1-D weight over the last dim, eps as a scalar input or a literal in the reference. With a
weight, both ``offset`` 0 and 1 (Gemma stores the scale as an offset from one) are candidates; the probe
keeps the one the reference computes.
Kernel: one program / CTA per row, fp32 accumulation, one read of the row held in registers.
Launcher: rows = numel // H; grid = rows. Notes at the bottom.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_FILE, Binding, Family, Renderer, cuda_module, eps_literal, kernel_source, py_signature,
                   set_constant)
from .rows import eps_expr, out_name, triton_row_head, triton_row_run

_EXCLUDE = {"sub", "var_mean", "native_layer_norm", "_softmax", "mm", "addmm", "bmm", "exp"}


def match(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not (sig.has("rsqrt") and sig.has_any("mean", "sum") and sig.has_any("pow", "mul")):
        return []
    if sig.has_any(*_EXCLUDE):
        return []
    d = problem.definition
    if len(d.outputs) != 1:
        return []
    out = next(iter(d.outputs.values()))
    tensors = {n: s for n, s in d.inputs.items() if not s.is_scalar}
    xs = [n for n, s in tensors.items() if s.shape == out.shape]
    if len(xs) != 1 or not out.shape:
        return []
    x = xs[0]
    weights = [n for n, s in tensors.items() if n != x and s.shape == [out.shape[-1]]]
    if len(tensors) - 1 - len(weights[:1]) != 0:
        return []
    scalars = [n for n, s in d.inputs.items() if s.is_scalar]
    roles = {"x": x}
    if weights:
        roles["weight"] = weights[0]
    consts: dict[str, Any] = {}
    if len(scalars) == 1:
        roles["eps"] = scalars[0]
    elif not scalars and eps_literal(d.reference) is not None:
        consts["eps"] = eps_literal(d.reference)
    else:
        return []
    if not weights:
        return [Binding(roles, consts)]
    return [Binding(roles, {**consts, "offset": 0.0}), Binding(roles, {**consts, "offset": 1.0})]


def _offset(b: Binding) -> float:
    return float(b.consts.get("offset", 0.0))


# ---------------------------------------------------------------------------------------------- pytorch


def render_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, y = b.roles["x"], b.roles.get("weight"), out_name(problem)
    wf = f"({_offset(b)!r} + {w}.float())" if w and _offset(b) else f"{w}.float()"
    scale = ""
    if w:
        scale = f" * {wf}" if not p["cast_before_weight"] else ""
    cast_w = ""
    if w and p["cast_before_weight"]:
        cast_w = f"\n    n = n.to({x}.dtype) * {w}" if not _offset(b) else f"\n    n = n.to({x}.dtype).float() * {wf}"
    return f"""import torch

{py_signature(problem)}
    xf = {x}.float()
    n = xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + {eps_expr(b)}){scale}{cast_w}
    {y}.copy_(n)
"""


# ----------------------------------------------------------------------------------------------- triton


def render_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, y = b.roles["x"], b.roles.get("weight"), out_name(problem)
    has_w = w is not None
    # The weight is loaded before the reduction, beside x: loaded after it, a one-row call waits for a
    # second DRAM round trip (the reduction's barriers keep the compiler from hoisting it).
    load_w = "wv = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)" if has_w else ""
    wv = f"({_offset(b)!r} + wv)" if _offset(b) else "wv"
    apply_w = ""
    if has_w and p["cast_before_weight"]:
        apply_w = f"n = n.to(y_ptr.dtype.element_ty).to(tl.float32) * {wv}"
    elif has_w:
        apply_w = f"n = n * {wv}"
    kernel = f"""{triton_row_head("rmsnorm", "x_ptr, w_ptr, y_ptr")}    {load_w}
    rstd = tl.rsqrt(tl.sum(xv * xv, axis=0) / n_cols + eps)
    n = xv * rstd
    {apply_w}
    tl.store(y_ptr + row * n_cols + cols, n.to(y_ptr.dtype.element_ty), mask=m)

"""
    return kernel + triton_row_run(problem, b, p, "rmsnorm", f"{x}, {w if has_w else x}, {y}")


# ------------------------------------------------------------------------------------------------- cuda

_CUDA_VEC_KERNEL = kernel_source("rmsnorm_vec.cu")

_CUDA_KERNEL = kernel_source("rmsnorm.cu")


def render_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, y = b.roles["x"], b.roles.get("weight"), out_name(problem)
    threads = p["threads"]
    has_w = "true" if w else "false"
    cbw = "true" if p["cast_before_weight"] else "false"
    w_ptr = f"reinterpret_cast<const scalar_t*>({w}.data_ptr())" if w else "nullptr"
    body = f"""  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  if (rows == 0) return;
  auto stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    const scalar_t* xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    scalar_t* yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    const scalar_t* wp = {w_ptr};
    const int vec_e = 16 / (int)sizeof(scalar_t);
    const bool vec = n_cols % vec_e == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(yp) % 16 == 0 && (wp == nullptr || reinterpret_cast<uintptr_t>(wp) % 16 == 0);
    // {threads} threads, more where the row would need over 8 vectors or elements per thread (up to the kernels'
    // launch bounds: 512 for rmsnorm_vec, 1024 for rmsnorm_rows)
    int threads = {threads};
    while (threads < (vec ? 512 : 1024) &&
           (vec ? (n_cols / vec_e + threads - 1) / threads : (n_cols + threads - 1) / threads) > 8)
      threads *= 2;
    const int per_thread = (n_cols + threads - 1) / threads;
    const int vpt = (n_cols / vec_e + threads - 1) / threads;
    if (vec && vpt <= 8) {{
      if (vpt <= 1) rmsnorm_vec<scalar_t, 1, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
      else if (vpt <= 2) rmsnorm_vec<scalar_t, 2, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
      else if (vpt <= 4) rmsnorm_vec<scalar_t, 4, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
      else rmsnorm_vec<scalar_t, 8, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
    }} else if (per_thread > 32) {{
      TORCH_CHECK(false, "row too long for this template: ", n_cols);
    }} else if (per_thread <= 4) rmsnorm_rows<scalar_t, 4, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
    else if (per_thread <= 8) rmsnorm_rows<scalar_t, 8, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
    else rmsnorm_rows<scalar_t, 32, {has_w}, {cbw}><<<rows, threads, 0, stream>>>(xp, wp, yp, n_cols, (float){eps_expr(b)}, {_offset(b)!r}f);
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, _CUDA_VEC_KERNEL + _CUDA_KERNEL, body)


# ---------------------------------------------------------------------------------------------- cute_dsl

_CUTE_KERNEL = kernel_source("rmsnorm_cute.py")


def render_cute(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, y = b.roles["x"], b.roles.get("weight"), out_name(problem)
    src = _CUTE_KERNEL
    consts = {
        "THREADS": int(p["threads"]),
        "HAS_WEIGHT": w is not None,
        "CAST_BEFORE_WEIGHT": bool(w is not None and p["cast_before_weight"]),
        "WEIGHT_OFFSET": _offset(b),
    }
    for name, value in consts.items():
        src = set_constant(src, "rmsnorm_cute.py", name, value)
    return f"""{src}

{py_signature(problem)}
    _rmsnorm_rows({x}, {w if w else "None"}, {y}, {eps_expr(b)})
"""


FAMILY = Family(
    "rmsnorm", match,
    renderers=(
        Renderer("pytorch", False, {"cast_before_weight": (False, True)}, render_pytorch),
        # more warps read faster on one-row calls (more of the row's loads issued at once): 16 was the best of
        # 4/8/16 on all three bundled RMSNorms on the H200, so it leads, with 32 after it
        Renderer("triton", True, {"cast_before_weight": (False, True), "num_warps": (16, 32, 8, 4)}, render_triton),
        Renderer(
            "cuda_cpp", True, {"cast_before_weight": (False, True), "threads": (256, 128, 512)}, render_cuda,
            file=CUDA_FILE,
        ),
        # never measured on a GPU yet: planned after the CUDA C++ and Triton groups
        Renderer("cute_dsl", True, {"cast_before_weight": (False, True), "threads": (256, 128)}, render_cute),
    ),
)

# Notes: the CuTe DSL file (kernels/rmsnorm_cute.py) compiles once per dtype and row length, the row count
# dynamic; rows of whole 16-byte vectors at 16-byte addresses take 128-bit loads, others one element at a time
# (all of a row in registers either way). Its compile to sm_90a is checked on the CPU; it has not been
# measured on a GPU yet, hence last among the kernel languages.
#
# The CUDA launcher takes rows of whole 16-byte vectors up to 8 × threads vectors through rmsnorm_vec,
# other rows through the scalar kernel up to 32 × threads elements, and refuses longer ones (TORCH_CHECK); the Triton
# kernel holds the whole row in registers (fine up to ~16K columns). Both assume contiguous inputs, which
# the judge provides. The rsqrt.approx PTX is within bf16/fp16 tolerance; for fp32 outputs with tight
# tolerances the Triton variant (exact rsqrt) is the safer pick.
#
# Tried and removed (H200, one-token rows of 3072 / 4096 / 7168):
# a row in slices, to escape the ~0.5 us a one-program reduction costs over x * w (bench/memory_floor.py
# --rows). Triton slices that each summed the whole row themselves read 1.66-1.70 us at 4 warps (whole rows:
# the same), 2.0-2.6 at 1-2 warps; CUDA slices over a thread-block cluster, sums exchanged through distributed
# shared memory, read 2.3-4.0 us (correct on the GPU; the cluster costs more than it saves). Commit 69a0655
# holds both.
