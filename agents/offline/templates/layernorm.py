"""LayerNorm over the last dim.

Reference shape: ops {native_layer_norm | var_mean/sub/mean...}, x shaped like the output, optional 1-D weight
and bias, eps a scalar input or a literal. Kernel: one program / CTA per row, fp32 math, the row held in
registers; launcher: grid = rows.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import CUDA_FILE, Binding, Family, Renderer, cuda_module, eps_literal, kernel_source, py_signature
from .rows import eps_expr, out_name, single_output_like, triton_row_head, triton_row_run

# The ops of a LayerNorm spelled out (mean, centre, mean of squares, rsqrt, affine, casts): an RMSNorm has
# no ``sub`` and is left to its own family; the probe tells the rest apart (e.g. a missing centring).
_LN_DECOMPOSED_OPS = {
    "_to_copy", "clone", "contiguous", "copy_", "alias", "detach", "view", "unsqueeze", "expand",
    "mean", "sum", "sub", "mul", "pow", "square", "div", "add", "rsqrt", "sqrt", "reciprocal", "var", "var_mean",
}  # fmt: skip
_BIAS_NAMES = ("bias", "beta", "shift")


def _layernorm_like(sig: OpSignature) -> bool:
    if sig.has_any("mm", "addmm", "bmm", "_softmax"):
        return False
    if sig.has("native_layer_norm") or (sig.has_any("var_mean", "var") and sig.has("sub")):
        return True
    return (
        sig.has("sub") and sig.has_any("mean", "sum") and sig.has_any("rsqrt", "sqrt") and sig.has_any("mul", "pow")
        and sig.only(_LN_DECOMPOSED_OPS)
    )  # fmt: skip


def match_layernorm(problem: Problem, sig: OpSignature) -> list[Binding]:
    """x, optional 1-D weight and bias over the last dim, eps; with two vectors both role orders (the one
    whose name reads as a bias, if any, first as the bias), with one both weight and bias: the probe keeps
    what the reference computes."""
    if not _layernorm_like(sig):
        return []
    found = single_output_like(problem)
    if found is None:
        return []
    x, shape = found
    d = problem.definition
    vecs = [n for n, s in d.inputs.items() if not s.is_scalar and n != x and s.shape == [shape[-1]]]
    others = [n for n, s in d.inputs.items() if not s.is_scalar and n not in (x, *vecs)]
    if others or len(vecs) > 2:
        return []
    vecs.sort(key=lambda n: any(k in n.lower() for k in _BIAS_NAMES))  # stable: a bias-like name last
    scalars = [n for n, s in d.inputs.items() if s.is_scalar]
    base: dict[str, str] = {"x": x}
    consts: dict[str, Any] = {}
    if len(scalars) == 1:
        base["eps"] = scalars[0]
    elif not scalars:
        consts["eps"] = eps_literal(d.reference) or 1e-5
    else:
        return []
    if len(vecs) == 2:
        affine = [{"weight": vecs[0], "bias": vecs[1]}, {"weight": vecs[1], "bias": vecs[0]}]
    elif vecs:
        affine = [{"weight": vecs[0]}, {"bias": vecs[0]}]
    else:
        affine = [{}]
    return [Binding({**base, **a}, consts) for a in affine]


def render_layernorm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    wf = f"{w}.float()" if w else "None"
    bf = f"{bias}.float()" if bias else "None"
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {out_name(problem)}.copy_(F.layer_norm({x}.float(), ({x}.shape[-1],), {wf}, {bf}, {eps_expr(b)}))
"""


def render_layernorm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    # weight and bias loaded beside x, before the reductions (after them, one DRAM round trip more per row)
    loads = "\n    ".join(
        [f"{v} = tl.load({ptr} + cols, mask=m, other=0.0).to(tl.float32)" for v, ptr, on in
         (("wv", "w_ptr", w), ("bv", "b_ptr", bias)) if on]
    )  # fmt: skip
    w_line = "n = n * wv" if w else ""
    b_line = "n = n + bv" if bias else ""
    kernel = f"""{triton_row_head("layernorm", "x_ptr, w_ptr, b_ptr, y_ptr")}    {loads}
    mean = tl.sum(xv, axis=0) / n_cols
    xc = tl.where(m, xv - mean, 0.0)
    n = xc * tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    {w_line}
    {b_line}
    tl.store(y_ptr + row * n_cols + cols, n.to(y_ptr.dtype.element_ty), mask=m)

"""
    return kernel + triton_row_run(problem, b, p, "layernorm", f"{x}, {w or x}, {bias or x}, {out_name(problem)}")


_LAYERNORM_CUDA = kernel_source("layernorm.cu")


def render_layernorm_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias, y, t = b.roles["x"], b.roles.get("weight"), b.roles.get("bias"), out_name(problem), p["threads"]
    flags = f"{'true' if w else 'false'}, {'true' if bias else 'false'}"

    def launch(vec: str, chunks: int) -> str:
        return (f"layernorm_rows<scalar_t, {vec}, {chunks}, {flags}><<<rows, threads, 0, stream>>>"
                f"(xp, wp, bp, yp, n_cols, (float){eps_expr(b)})")  # fmt: skip

    def ptr(name: str | None) -> str:
        return f"reinterpret_cast<const scalar_t*>({name}.data_ptr())" if name else "nullptr"

    same_dtype = "".join(
        f'\n  TORCH_CHECK({n}.scalar_type() == {x}.scalar_type(), "{n}: dtype differs from {x}");'
        for n in (w, bias, y) if n
    )  # fmt: skip
    body = f"""  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  if (rows == 0) return;{same_dtype}
  auto stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    constexpr int VEC = 16 / sizeof(scalar_t);
    const scalar_t* xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    const scalar_t* wp = {ptr(w)};
    const scalar_t* bp = {ptr(bias)};
    scalar_t* yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    const bool vec = n_cols % VEC == 0 && ln_aligned16(xp) && ln_aligned16(wp) && ln_aligned16(bp) && ln_aligned16(yp);
    // {t} threads, more (up to 1024) where the row would need more than 4 chunks (vector) or elements per thread
    int threads = {t};
    while (threads < 1024 && (vec ? (n_cols / VEC + threads - 1) / threads : (n_cols + threads - 1) / threads) > 4)
      threads *= 2;
    const int chunks = (n_cols / VEC + threads - 1) / threads;
    const int per_thread = (n_cols + threads - 1) / threads;
    if (vec && chunks <= 1) {launch("VEC", 1)};
    else if (vec && chunks <= 2) {launch("VEC", 2)};
    else if (vec && chunks <= 4) {launch("VEC", 4)};
    else if (per_thread <= 4) {launch("1", 4)};
    else {{
      TORCH_CHECK(per_thread <= 32, "row too long for this template: ", n_cols);
      {launch("1", 32)};
    }}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, _LAYERNORM_CUDA, body)


LAYERNORM = Family(
    "layernorm", match_layernorm,
    renderers=(
        Renderer("pytorch", False, {}, render_layernorm_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_layernorm_triton),
        # 128 threads first: one 16-byte load per thread for H = 1024 in bf16 (the common row lengths).
        Renderer("cuda_cpp", True, {"threads": (128, 256, 512, 1024)}, render_layernorm_cuda, file=CUDA_FILE),
    ),
)
