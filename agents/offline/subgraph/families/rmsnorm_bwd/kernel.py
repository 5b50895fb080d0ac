"""RMSNorm backward in one pass: each program takes a run of rows, holds a few rows of x and of the gradient in
registers (float32; up to 16 narrow rows at a time), computes each row's rstd and ``mean(gw * xhat)`` and stores
dx, and adds ``grad * xhat`` into its own partial sum of dw, stored once at the end; the partials (one row per
program) are summed by torch.

Inductor's code of the same formula reads x and the gradient twice (once for dx, once more for the reduction of
dw across rows); here each is read once. Rows up to 16384 columns.

Launcher: ``rmsnorm_bwd(x, weight, grad, eps, offset, dx_dtype, dw_dtype, programs, out)`` (``dw_dtype`` None: dx
alone; ``out``: contiguous buffers to store dx and dw in).
On CUDA each call shape runs the fastest of torch's own formula (the default) and this kernel with one or four
programs per SM whose outputs agree with it (``families/measure.fastest``).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import triton
import triton.language as tl

from ..measure import DEFAULT, chosen_way, stored

MAX_COLS = 16384
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _rmsnorm_bwd_rows(x_ptr, w_ptr, g_ptr, dx_ptr, part_ptr, n_rows, n_cols, rows_per_program, eps, offset,
                      HAS_W: tl.constexpr, HAS_DW: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr):  # fmt: skip
    # ROWS rows at a time: narrow rows alone keep too few bytes in flight per SM to reach the memory's bandwidth
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32) + offset
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    end = tl.minimum(first + rows_per_program, n_rows)  # this program's run; the last one may end early
    for i in range(0, rows_per_program, ROWS):
        rows = first + i + tl.arange(0, ROWS).to(tl.int64)
        at = rows[:, None] * n_cols + cols[None, :]
        here = (rows < end)[:, None] & ok[None, :]  # nothing read past the run: nothing added there
        x = tl.load(x_ptr + at, mask=here, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + at, mask=here, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        xhat = x * rstd[:, None]
        if HAS_W:
            gw = g * w[None, :]
        else:
            gw = g
        dot = tl.sum(gw * xhat, axis=1) / n_cols
        tl.store(dx_ptr + at, (rstd[:, None] * (gw - xhat * dot[:, None])).to(dx_ptr.dtype.element_ty), mask=here)
        if HAS_DW:
            dw += tl.sum(g * xhat, axis=0)
    if HAS_DW:
        tl.store(part_ptr + pid.to(tl.int64) * n_cols + cols, dw, mask=ok)


def rows_at_once(block: int) -> int:
    """Rows a program takes per step: a tile of about 4096 elements, at most 16 rows."""
    return max(1, min(16, 4096 // block))


def takes(x: torch.Tensor, weight: Optional[torch.Tensor], grad: torch.Tensor) -> bool:
    """Shapes and dtypes only: x and the gradient alike, the weight 1-D over the last dim, rows that fit."""
    floats = (torch.float32, torch.float16, torch.bfloat16)
    return (x.dim() >= 1 and x.shape == grad.shape and 0 < x.shape[-1] <= MAX_COLS and x.dtype in floats
            and grad.dtype in floats and (weight is None or (weight.shape == x.shape[-1:] and weight.dtype in floats)))


def rmsnorm_bwd(x: torch.Tensor, weight: Optional[torch.Tensor], grad: torch.Tensor, eps: float, offset: float,
                dx_dtype: torch.dtype, dw_dtype: Optional[torch.dtype],
                programs: int = 0, out: tuple[torch.Tensor, ...] | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(dx, dw), or dx alone where ``dw_dtype`` is None. ``programs``: how many (0: four per SM). ``out``: dx's
    buffer (and dw's), stored into."""
    n_cols = x.shape[-1]
    x2, g2 = x.reshape(-1, n_cols).contiguous(), grad.reshape(-1, n_cols).contiguous()
    n_rows = x2.shape[0]
    dx = out[0] if out is not None else torch.empty(x.shape, dtype=dx_dtype, device=x.device)
    if programs <= 0:
        programs = 4 * torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    per = triton.cdiv(max(n_rows, 1), max(1, min(programs, n_rows)))
    programs = triton.cdiv(max(n_rows, 1), per)
    part = torch.zeros((programs, n_cols), dtype=torch.float32, device=x.device) if dw_dtype is not None else dx
    block = triton.next_power_of_2(n_cols)
    rows, tile = rows_at_once(block), rows_at_once(block) * block
    if n_rows:
        _rmsnorm_bwd_rows[(programs,)](x2, weight if weight is not None else x2, g2, dx, part, n_rows, n_cols, per,
                                       eps, offset, HAS_W=weight is not None, HAS_DW=dw_dtype is not None,
                                       BLOCK=block, ROWS=rows,
                                       num_warps=4 if tile <= 1024 else 8 if tile <= 4096 else 16)
    if dw_dtype is None:
        return dx
    if out is not None and out[1].dtype == torch.float32:
        return dx, torch.sum(part, dim=0, out=out[1])
    return dx, stored(part.sum(dim=0).to(dw_dtype), out[1:] if out is not None else None)


def fastest_rmsnorm_bwd(x: torch.Tensor, weight: Optional[torch.Tensor], grad: torch.Tensor, eps: float,
                        offset: float, dx_dtype: torch.dtype, dw_dtype: Optional[torch.dtype],
                        default: Callable[[], torch.Tensor | tuple[torch.Tensor, torch.Tensor]],
                        out: tuple[torch.Tensor, ...] | None = None):  # fmt: skip
    if not x.is_cuda or not takes(x, weight, grad):
        return stored(default(), out)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    ways: dict[str, Callable] = {DEFAULT: lambda into=None: stored(default(), into)}
    for per_sm in (1, 4):
        ways[f"triton_{per_sm}_per_sm"] = lambda into=None, n=per_sm * sms: rmsnorm_bwd(
            x, weight, grad, eps, offset, dx_dtype, dw_dtype, n, into)  # fmt: skip
    key = tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                for a in (x, weight, grad, eps, offset, dx_dtype, dw_dtype))  # fmt: skip
    return ways[chosen_way((key, x.device), ways, _CHOSEN, op="rmsnorm_bwd")](out)
