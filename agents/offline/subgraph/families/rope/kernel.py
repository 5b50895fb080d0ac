"""Rotary position embedding over rows of x's last dim (head_dim); the first ``rot_dim`` columns rotated.

Pair p of the rotated columns is (a, b) = (p, p + rot_dim/2) half-split or (2p, 2p + 1) interleaved:
y[a] = x[a] cos[a] - x[b] sin[a], y[b] = x[b] cos[b] + x[a] sin[b] (with ``PAIR_COS``, one cos/sin value per
pair: cos[p], sin[p]). Columns from rot_dim on are copied. x may be a strided view (rows reached through up to
three leading strides, the last dim contiguous); cos and sin are read through their own strides (0 where they
broadcast), so neither is copied.

Kernel: a 1-D grid over blocks of ROWS rows, each pair's two columns loaded once as two tiles, fp32 math, one
rounding on the store. Launcher: ``rope(x, cos, sin, rot_dim, interleaved, pair_cos, out_dtype)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_rows(x_ptr, cos_ptr, sin_ptr, y_ptr, n_rows, d1, d2, sx0, sx1, sx2, sc0, sc1, sc2, scd, ss0, ss1, ss2,
               ssd, head_dim, rot_dim, INTERLEAVED: tl.constexpr, PAIR_COS: tl.constexpr, ROWS: tl.constexpr,
               BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    i2 = rows % d2
    i1 = (rows // d2) % d1
    i0 = rows // (d2 * d1)
    row_ok = (rows < n_rows)[:, None]
    # pair p: columns (a, b) = (p, p + rot_dim / 2) half-split, (2p, 2p + 1) interleaved; each loaded once
    p = tl.arange(0, BLOCK_P)
    half = rot_dim // 2
    m = row_ok & (p < half)[None, :]
    if INTERLEAVED:
        a = 2 * p
        b = a + 1
    else:
        a = p
        b = p + half
    if PAIR_COS:
        ja = p
        jb = p
    else:
        ja = a
        jb = b
    x_row = x_ptr + (i0 * sx0 + i1 * sx1 + i2 * sx2)[:, None]
    c_row = cos_ptr + (i0 * sc0 + i1 * sc1 + i2 * sc2)[:, None]
    s_row = sin_ptr + (i0 * ss0 + i1 * ss1 + i2 * ss2)[:, None]
    xa = tl.load(x_row + a[None, :], mask=m, other=0.0).to(tl.float32)
    xb = tl.load(x_row + b[None, :], mask=m, other=0.0).to(tl.float32)
    ca = tl.load(c_row + (ja * scd)[None, :], mask=m, other=0.0).to(tl.float32)
    sa = tl.load(s_row + (ja * ssd)[None, :], mask=m, other=0.0).to(tl.float32)
    if PAIR_COS:
        cb = ca
        sb = sa
    else:
        cb = tl.load(c_row + (jb * scd)[None, :], mask=m, other=0.0).to(tl.float32)
        sb = tl.load(s_row + (jb * ssd)[None, :], mask=m, other=0.0).to(tl.float32)
    y_row = y_ptr + rows[:, None] * head_dim
    tl.store(y_row + a[None, :], (xa * ca - xb * sa).to(y_ptr.dtype.element_ty), mask=m)
    tl.store(y_row + b[None, :], (xb * cb + xa * sb).to(y_ptr.dtype.element_ty), mask=m)
    if BLOCK_REST > 0:  # columns past rot_dim pass through
        r = rot_dim + tl.arange(0, BLOCK_REST)
        mr = row_ok & (r < head_dim)[None, :]
        tl.store(y_row + r[None, :], tl.load(x_row + r[None, :], mask=mr).to(y_ptr.dtype.element_ty), mask=mr)


def _three_leading(t: torch.Tensor) -> torch.Tensor:
    """``t`` with exactly three leading dims before its last (size-1 dims put in front)."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def rope(x, cos, sin, rot_dim, interleaved, pair_cos, out_dtype, out=None):
    """x rotated over its first rot_dim features; into ``out[0]`` (contiguous, x's shape) where given."""
    head_dim = x.shape[-1]
    if rot_dim % 2 or not 0 < rot_dim <= head_dim:
        raise ValueError(f"rot_dim {rot_dim} must be even and within head_dim {head_dim}")
    lead = tuple(x.shape[:-1])
    width = rot_dim // 2 if pair_cos else rot_dim
    cos = torch.broadcast_to(cos, (*lead, width))
    sin = torch.broadcast_to(sin, (*lead, width))
    if x.stride(-1) != 1 and x.shape[-1] > 1:
        x = x.contiguous()
    if len(lead) > 3:
        x, cos, sin = (t.reshape(-1, t.shape[-1]) for t in (x, cos, sin))
    x, cos, sin = (_three_leading(t) for t in (x, cos, sin))
    y = out[0] if out is not None else torch.empty(lead + (head_dim,), dtype=out_dtype, device=x.device)
    n_rows = y.numel() // max(head_dim, 1)
    if n_rows == 0:
        return y
    block_p = triton.next_power_of_2(rot_dim // 2)
    rest = head_dim - rot_dim
    rows = max(1, min(16, 1024 // block_p))
    _, d1, d2, _ = x.shape
    _rope_rows[(triton.cdiv(n_rows, rows),)](
        x, cos, sin, y, n_rows, d1, d2, *x.stride()[:3], *cos.stride(), *sin.stride(), head_dim, rot_dim,
        INTERLEAVED=interleaved, PAIR_COS=pair_cos, ROWS=rows, BLOCK_P=block_p,
        BLOCK_REST=triton.next_power_of_2(rest) if rest else 0, num_warps=4,
    )  # fmt: skip
    return y
