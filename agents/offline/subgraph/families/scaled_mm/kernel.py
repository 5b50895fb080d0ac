"""Block-scaled GEMM (fp8 operands, one scale per tile) in Triton: the dequantization fused into the GEMM.

A reference that dequantizes first writes both operands out in float32 and multiplies them with fp32 FMA
(no tensor cores): at M in the thousands that is tens of times the time of the fp8 product. Each program here
takes a ``[BLOCK_M, BLOCK_N]`` tile of y and walks K one scale block at a time: the fp8 tiles of a and b meet on
tensor cores (fp32 accumulation within the block), and the block's partial product is scaled by a's per-row and
b's per-column scale in float32 and added up, so no K block's rounding carries into another (the promotion
DeepSeek-V3 describes). Served: a's and b's K blocks equal, a power of two from 16 to 256 (the K step); any row
blocks (a scale is looked up per row and per column).

On CUDA each call shape runs the fastest that agrees with the reference's own semantics (the default) of that
and the kernel at a few tile shapes, measured on the shape's first call (``measure.fastest``).
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from ..measure import DEFAULT, chosen_way

# (BLOCK_M, BLOCK_N, warps, stages): small-M tiles stream the weight, large ones reuse it
_TILES = ((16, 64, 4, 4), (64, 128, 4, 3), (128, 128, 8, 3))
_CHOSEN: dict = {}


@triton.jit
def _block_scaled_mm(a_ptr, as_ptr, b_ptr, bs_ptr, y_ptr, M, N, K, sam, sasm, sask, sbn, sbsn, sbsk, a_rows,
                     b_rows, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = m < M, n < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        k_ok = k < K
        a = tl.load(a_ptr + m[:, None].to(tl.int64) * sam + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + n[:, None].to(tl.int64) * sbn + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        part = tl.dot(a, tl.trans(b))
        sa = tl.load(as_ptr + (m // a_rows) * sasm + kb * sask, mask=m_ok, other=0.0)
        sb = tl.load(bs_ptr + (n // b_rows) * sbsn + kb * sbsk, mask=n_ok, other=0.0)
        acc += part * sa[:, None] * sb[None, :]
    tl.store(y_ptr + m[:, None].to(tl.int64) * N + n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])  # fmt: skip


def takes(a, a_scale, b, a_block, b_block) -> bool:
    """Whether ``scaled_mm`` serves this call: 2-D operands of one low-precision dtype, equal K blocks that are
    a power of two from 16 to 256."""
    k_block = a_block[1]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or a.dtype != b.dtype or b_block[1] != k_block:
        return False
    return 16 <= k_block <= 256 and k_block & (k_block - 1) == 0 and a_scale.dtype == torch.float32


def scaled_mm(a, a_scale, b, b_scale, a_block, b_block, out_dtype, block_m=64, block_n=128, warps=4, stages=3):
    m, k = a.shape
    n = b.shape[0]
    a = a if a.stride(-1) == 1 else a.contiguous()
    b = b if b.stride(-1) == 1 else b.contiguous()
    a_scale, b_scale = a_scale.float(), b_scale.float()
    y = torch.empty((m, n), dtype=out_dtype, device=a.device)
    if y.numel() == 0:
        return y
    if k == 0:
        return y.zero_()
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _block_scaled_mm[grid](a, a_scale, b, b_scale, y, m, n, k, a.stride(0), a_scale.stride(0), a_scale.stride(1),
                           b.stride(0), b_scale.stride(0), b_scale.stride(1), a_block[0], b_block[0],
                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=a_block[1], num_warps=warps,
                           num_stages=stages)  # fmt: skip
    return y


def block_scaled_mm(a, a_scale, b, b_scale, a_block, b_block, out_dtype, reference: Callable[[], torch.Tensor]):
    """``reference()``: the op's own semantics on these arguments, the default way."""
    if not a.is_cuda or not takes(a, a_scale, b, a_block, b_block):
        return reference()
    ways: dict[str, Callable[[], torch.Tensor]] = {DEFAULT: reference}
    for bm, bn, warps, stages in _TILES:
        ways[f"triton_{bm}x{bn}"] = lambda bm=bm, bn=bn, w=warps, s=stages: scaled_mm(
            a, a_scale, b, b_scale, a_block, b_block, out_dtype, bm, bn, w, s)  # fmt: skip
    key = (tuple(a.shape), tuple(b.shape), a.dtype, tuple(a_block), tuple(b_block), out_dtype, a.device)
    way = chosen_way(key, ways, _CHOSEN, op="scaled_mm")
    return ways[way]()
