import torch
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


@triton.jit
def _softmax_row_loop(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # Long rows: per-lane online (max, sum of exp(x - max)) over BLOCK-wide chunks, then a second loop
    # writing exp(x - max) / sum.
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n_cols
    yr = y_ptr + row * n_cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        v = tl.load(xr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        mn = tl.maximum(m, v)
        live = mn > -float("inf")  # a lane that has seen only -inf keeps s = 0 (no exp(-inf - -inf))
        s = tl.where(live, s * tl.exp(m - mn) + tl.exp(v - mn), 0.0)
        m = mn
    row_max = tl.max(m, axis=0)
    scale = tl.where(m > -float("inf"), tl.exp(m - row_max), 0.0)
    inv = 1.0 / tl.sum(s * scale, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        v = tl.load(xr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(yr + cols, (tl.exp(v - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)
