"""RMSNorm over the last dim, with the residual add before it (optional) and a weight after it (optional).

Kernel: one program per row, the row held in registers (up to ~16K columns), fp32 statistics; with a
residual it also stores h = x + residual (rounded to x's dtype, as the reference's add is) and normalises
that rounded h. Launcher: ``rmsnorm(x, residual, weight, ..., out=None) -> (y, h or None)``, storing into
``out`` (y's buffer, then h's with a residual; contiguous) where given.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, eps, offset,
                  HAS_RES: tl.constexpr, HAS_W: tl.constexpr, CAST_BEFORE_W: tl.constexpr,
                  BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0)
    if HAS_RES:
        x = x + tl.load(r_ptr + row * n_cols + cols, mask=m, other=0.0)
        tl.store(h_ptr + row * n_cols + cols, x, mask=m)
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=m, other=0.0)
    xf = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / n_cols + eps)
    n = xf * rstd
    if HAS_W:
        if CAST_BEFORE_W:
            wv = w.to(tl.float32) + offset
            n = n.to(x.dtype).to(tl.float32) * wv.to(w.dtype).to(tl.float32)
        else:
            n = n * (w.to(tl.float32) + offset)
    tl.store(y_ptr + row * n_cols + cols, n.to(y_ptr.dtype.element_ty), mask=m)


def rmsnorm(x, residual, weight, eps, offset, cast_before_weight, out_dtype, out=None):
    x = x.contiguous()
    n_cols = x.shape[-1]
    rows = x.numel() // max(n_cols, 1)
    if out is not None:
        y, h = out[0], (out[1] if residual is not None else None)
    else:
        y = torch.empty(x.shape, dtype=out_dtype, device=x.device)
        h = torch.empty_like(x) if residual is not None else None
    if rows == 0:
        return y, h
    block = triton.next_power_of_2(n_cols)
    r = residual.contiguous() if residual is not None else x
    w = weight.contiguous() if weight is not None else x
    warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    _rmsnorm_rows[(rows,)](x, r, w, y, h if h is not None else y, n_cols, float(eps), float(offset),
                           HAS_RES=residual is not None, HAS_W=weight is not None,
                           CAST_BEFORE_W=bool(cast_before_weight), BLOCK=block, num_warps=warps)  # fmt: skip
    return y, h
