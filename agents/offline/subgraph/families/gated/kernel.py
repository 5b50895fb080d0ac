"""Gated activation y = act(a) * b over rows of the last dim; a and b may be strided views (the two halves of
one tensor, ``x.chunk(2, -1)``): each is read through its row stride, so no copy is made first.

Kernel: a 2-D grid (rows, column blocks), fp32 math, one rounding on the store. Launcher:
``gated(a, b, act, act_dtype, out_dtype)``; the activation is rounded only to the output's dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_ACT = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "quick_gelu": 3, "relu": 4}


@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _gated_rows(a_ptr, b_ptr, y_ptr, n_cols, a_row, b_row, ACT: tl.constexpr, ROUND_ACT: tl.constexpr,
                BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n_cols
    a = tl.load(a_ptr + row * a_row + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * b_row + cols, mask=m, other=0.0).to(tl.float32)
    if ACT == 0:
        g = a * tl.sigmoid(a)
    elif ACT == 1:
        g = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476))
    elif ACT == 2:
        g = 0.5 * a * (1.0 + _tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))
    elif ACT == 3:
        g = a * tl.sigmoid(1.702 * a)
    else:
        g = tl.maximum(a, 0.0)
    if ROUND_ACT:
        g = g.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, (g * b).to(y_ptr.dtype.element_ty), mask=m)


def _rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``t`` (or a contiguous copy) and its row stride, when its rows of the last dim are evenly spaced."""
    if t.dim() == 0 or t.stride(-1) != 1:
        t = t.contiguous()
    step = t.stride(-2) if t.dim() >= 2 else t.shape[-1]
    for i in range(t.dim() - 2):
        if t.shape[i] > 1 and t.stride(i) != t.stride(i + 1) * t.shape[i + 1]:
            return _rows(t.contiguous())
    return t, step


def gated(a, b, act, act_dtype, out_dtype, out=None):
    """act(a) * b over rows (broadcast where a and b differ); into ``out[0]`` (contiguous) where given."""
    if act_dtype not in (None, out_dtype):
        raise ValueError(f"the kernel rounds the activation to the output dtype {out_dtype} only, not {act_dtype}")
    if a.shape != b.shape:
        a, b = torch.broadcast_tensors(a, b)
        a, b = a.contiguous(), b.contiguous()
    y = out[0] if out is not None else torch.empty(a.shape, dtype=out_dtype, device=a.device)
    n_cols = a.shape[-1] if a.dim() else 1
    rows = y.numel() // max(n_cols, 1)
    if rows == 0:
        return y
    a, a_row = _rows(a)
    b, b_row = _rows(b)
    block = min(triton.next_power_of_2(n_cols), 2048)
    grid = (rows, triton.cdiv(n_cols, block))
    _gated_rows[grid](a, b, y, n_cols, a_row, b_row, ACT=_ACT[act], ROUND_ACT=act_dtype is not None,
                             BLOCK=block, num_warps=4)
    return y
