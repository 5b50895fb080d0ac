"""Rows added by index without atomics: the source rows are sorted by their destination (``torch.sort``, on the
GPU, stable), each destination row's run of sources is found by ``searchsorted``, and one program per destination
row and column block adds its run to the base row (or zeros) in float32, in the sources' order (after the per-row
scale, the product rounded to the accumulation dtype as the reference's multiply rounds it), and stores once, in
the output dtype: in float32 the sum of ``index_add`` on the CPU, bit for bit. A program loads ``AHEAD`` sources of
its run before it adds them (in order): one source row at a time, each load waited for, kept a combine of k rows per
token at a third of the memory's speed (H100: 216 µs for 161 MB read and 40 MB written).

``index_add`` on CUDA (eager and Inductor's code alike) adds every source element into the destination with an
atomic; a MoE combine of k rows per token then pays k read-modify-writes per output element in L2, and the
destination is first zeroed and then, where the reference casts after the scatter, read again to cast. Here
each source row is read once and each destination row written once. Indices outside ``[0, rows)`` (an error in
the reference) are not added. Nothing reads on the host, so a CUDA graph holds the call.

Launcher: ``index_add_rows(base, index, src, scale, rows, acc_dtype, out_dtype, block, num_warps)``. On CUDA
each call shape runs the fastest of torch's own ``index_add`` (the default) and this kernel at a few block
sizes whose output agrees with it (``families/measure.fastest``).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import triton
import triton.language as tl

from ..measure import DEFAULT, chosen_way, stored

# (columns per program, warps, sources loaded ahead): each a contender
_BLOCKS = ((256, 2, 4), (1024, 4, 4), (1024, 4, 8), (2048, 8, 4))
_FLOAT = (torch.float32, torch.float16, torch.bfloat16)
_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _index_add_rows(src_ptr, scale_ptr, order_ptr, starts_ptr, base_ptr, y_ptr, cols, src_row, base_row,
                    HAS_SCALE: tl.constexpr, HAS_BASE: tl.constexpr, ACC: tl.constexpr,
                    BLOCK: tl.constexpr, AHEAD: tl.constexpr):  # fmt: skip
    t = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = c < cols
    begin = tl.load(starts_ptr + t)
    end = tl.load(starts_ptr + t + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    if HAS_BASE:
        acc += tl.load(base_ptr + t * base_row + c, mask=ok, other=0.0).to(ACC).to(tl.float32)
    for j0 in range(begin, end, AHEAD):
        # unrolled with no branch: no load waits on an add, so the AHEAD loads are in flight together; the adds
        # stay in the run's order (a source past the run's end, its position clamped to the run's last, loads as
        # zero, and adding zero changes no sum)
        for a in tl.static_range(AHEAD):
            r = tl.load(order_ptr + tl.minimum(j0 + a, end - 1)).to(tl.int64)
            here = ok & (tl.zeros_like(c) + (j0 + a) < end)  # (as a block: the interpreter takes no scalar mask here)
            v = tl.load(src_ptr + r * src_row + c, mask=here, other=0.0).to(ACC).to(tl.float32)
            if HAS_SCALE:
                s = tl.load(scale_ptr + r).to(ACC).to(tl.float32)
                v = (v * s).to(ACC).to(tl.float32)
            acc += v
    tl.store(y_ptr + t * cols + c, acc.to(y_ptr.dtype.element_ty), mask=ok)


def takes(base: Optional[torch.Tensor], index: torch.Tensor, src: torch.Tensor, scale: Optional[torch.Tensor],
          rows: int, acc_dtype: torch.dtype, out_dtype: torch.dtype) -> bool:  # fmt: skip
    """Rows of a 2-D source added into ``rows`` rows by a 1-D index, in floating dtypes (shapes and dtypes only)."""
    n = src.shape[0] if src.dim() == 2 else -1
    return (src.dim() == 2 and index.numel() == n and not index.dtype.is_floating_point and index.dtype != torch.bool
            and src.dtype in _FLOAT and acc_dtype in _FLOAT and out_dtype in _FLOAT
            and (scale is None or (scale.numel() == n and scale.dtype in _FLOAT))
            and (base is None or (base.dim() == 2 and tuple(base.shape) == (rows, src.shape[1])
                                  and base.dtype in _FLOAT)))  # fmt: skip


def index_add_rows(base: Optional[torch.Tensor], index: torch.Tensor, src: torch.Tensor,
                   scale: Optional[torch.Tensor], rows: int, acc_dtype: torch.dtype, out_dtype: torch.dtype,
                   block: int = 1024, num_warps: int = 4, out: tuple[torch.Tensor] | None = None,
                   ahead: int = 4) -> torch.Tensor:  # fmt: skip
    cols = src.shape[1]
    y = out[0] if out is not None else torch.empty((rows, cols), dtype=out_dtype, device=src.device)
    if rows == 0 or cols == 0:
        return y
    flat = index.reshape(-1)
    if flat.dtype == torch.int64 and rows < 2**31:  # 32-bit keys: half the radix sort's passes
        flat = flat.clamp(-1, rows).to(torch.int32)  # outside [0, rows) stays outside
    keys, order = torch.sort(flat, stable=True)
    starts = torch.searchsorted(keys, torch.arange(rows + 1, device=keys.device, dtype=keys.dtype))
    src = src if src.stride(1) == 1 else src.contiguous()
    scale = scale.reshape(-1).contiguous() if scale is not None else None
    base = base if base is None or base.stride(1) == 1 else base.contiguous()
    _index_add_rows[(rows, triton.cdiv(cols, block))](
        src, scale if scale is not None else src, order, starts, base if base is not None else src, y, cols,
        src.stride(0), base.stride(0) if base is not None else 0, HAS_SCALE=scale is not None,
        HAS_BASE=base is not None, ACC=_TL[acc_dtype], BLOCK=block, AHEAD=ahead, num_warps=num_warps,
    )  # fmt: skip
    return y


def fastest_index_add_rows(base: Optional[torch.Tensor], index: torch.Tensor, src: torch.Tensor,
                           scale: Optional[torch.Tensor], rows: int, acc_dtype: torch.dtype, out_dtype: torch.dtype,
                           default: Callable[[], torch.Tensor],
                           out: tuple[torch.Tensor] | None = None) -> torch.Tensor:  # fmt: skip
    args = (base, index, src, scale, rows, acc_dtype, out_dtype)
    if not src.is_cuda or not takes(*args):
        return stored(default(), out)
    ways: dict[str, Callable[..., torch.Tensor]] = {DEFAULT: lambda into=None: stored(default(), into)}
    for block, warps, ahead in _BLOCKS:
        ways[f"triton_{block}x{warps}_ahead{ahead}"] = lambda into=None, b=block, w=warps, a=ahead: index_add_rows(
            *args, b, w, into, a)  # fmt: skip
    key = tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
    return ways[chosen_way((key, src.device), ways, _CHOSEN, op="index_add_rows")](out)
