"""A grouped GEMM with no host sync: rows of ``a`` sorted by group (``offs``: each group's end, cumulative) meet
their group's ``b``, in one Triton launch that a CUDA graph can hold.

torch's fallback for fp16/fp32 ``_grouped_mm`` reads the offsets on the host and runs a GEMM per group, so a
MoE layer in those dtypes cannot be captured as a graph and pays a launch per expert. Here each program takes one
tile of one group's rows: it reads the offsets, counts each group's tiles (``cdiv(rows, BLOCK_M)``) and their
running sum, and finds its group as the number of groups whose tiles all come before its own; the grid is the bound
``cdiv(M, BLOCK_M) + groups`` (programs past the last tile return). One launch per call, nothing before it.
fp32 products accumulate in fp32; fp32 inputs multiply at full precision (no TF32), as the fallback's ``mm`` does.
Rows past the last offset are not written (the fallback leaves them uninitialised too).

On CUDA each call shape runs the fastest of this kernel at a few tile sizes whose output agrees with torch's own
``_grouped_mm`` (the default), measured on the shape's first call (``families/measure.fastest``); the default
runs only where none agrees. Timed alone, the fallback can read faster at a few rows, but inside a candidate's
CUDA graph its host read fails the capture and the whole call runs eagerly (an fp16 MoE layer read 1.2 ms at one
token against 0.16 ms at 455 while the fallback could be kept; 99 µs at one token since, on an H100).

Shipped inside subgraph candidates: torch and triton.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from .families.measure import DEFAULT, chosen_way

# (BLOCK_M, BLOCK_N, BLOCK_K, warps): few rows per expert (decode) to many (prefill); at 65536 rows of K = 512 the
# widest tile with BLOCK_K = 32 read 2x slower than a cuBLAS GEMM per expert (H100), hence the deeper K step
_TILES = ((64, 64, 32, 4), (16, 64, 64, 4), (128, 128, 32, 8), (128, 128, 64, 8))
_MAX_GROUPS = 1024
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _grouped_mm_tiles(a_ptr, b_ptr, offs_ptr, y_ptr, M, N, K, G, sam, sak, sbg, sbk, sbn, sym,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_G: tl.constexpr,
                      IEEE: tl.constexpr):  # fmt: skip
    t = tl.program_id(0)
    # every program maps tiles to groups from the offsets itself (one load of G ends): done as torch ops before
    # the launch, that map was about ten small kernels more per call, which at a few rows cost more than the GEMM
    gs = tl.arange(0, BLOCK_G)
    ends = tl.load(offs_ptr + gs, mask=gs < G, other=0).to(tl.int64)
    ends = tl.minimum(tl.maximum(ends, 0), M)  # offsets past the rows would index past a and y
    prev = tl.load(offs_ptr + gs - 1, mask=(gs >= 1) & (gs < G), other=0).to(tl.int64)
    prev = tl.minimum(tl.maximum(prev, 0), M)
    tiles = tl.where(gs < G, (tl.maximum(ends - prev, 0) + BLOCK_M - 1) // BLOCK_M, 0)
    last = tl.cumsum(tiles, axis=0)  # one past each group's last tile
    if t >= tl.sum(tiles, axis=0):
        return
    g = tl.sum((last <= t).to(tl.int32), axis=0)  # groups whose tiles all come before t
    here = gs == g
    row_start = tl.sum(tl.where(here, prev, 0), axis=0)
    row_end = tl.sum(tl.where(here, ends, 0), axis=0)
    first = tl.sum(tl.where(here, last - tiles, 0), axis=0)
    rows = row_start + (t - first) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < row_end, cols < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(a_ptr + rows[:, None] * sam + ks[None, :] * sak, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + g.to(tl.int64) * sbg + ks[:, None] * sbk + cols[None, :] * sbn,
                    mask=k_ok[:, None] & col_ok[None, :], other=0.0)  # fmt: skip
        if IEEE:
            acc += tl.dot(a, b, input_precision="ieee")
        else:
            acc += tl.dot(a, b)
    tl.store(y_ptr + rows[:, None] * sym + cols[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])  # fmt: skip


def takes(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> bool:
    """The 2-D by 3-D form in fp16 or fp32, offsets one per group (shapes and dtypes only)."""
    return (a.dim() == 2 and b.dim() == 3 and offs.dim() == 1 and offs.shape[0] == b.shape[0] <= _MAX_GROUPS
            and a.shape[1] == b.shape[1] and a.dtype == b.dtype and a.dtype in (torch.float16, torch.float32)
            and not offs.dtype.is_floating_point)  # fmt: skip


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, block_m: int = 64, block_n: int = 64,
               block_k: int = 32, num_warps: int = 4) -> torch.Tensor:  # fmt: skip
    m, k = a.shape
    groups, _, n = b.shape
    y = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0 or groups == 0:
        return y
    offs = offs.contiguous()
    grid = (triton.cdiv(m, block_m) + groups, triton.cdiv(n, block_n))
    _grouped_mm_tiles[grid](a, b, offs, y, m, n, k, groups, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            b.stride(2), y.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                            BLOCK_G=max(triton.next_power_of_2(groups), 2), IEEE=a.dtype == torch.float32,
                            num_warps=num_warps)  # fmt: skip
    return y


def fastest_grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor,
                       default: Callable[[], torch.Tensor]) -> torch.Tensor:  # fmt: skip
    if not a.is_cuda or not takes(a, b, offs):
        return default()
    ways: dict[str, Callable[[], torch.Tensor]] = {DEFAULT: default}
    for bm, bn, bk, warps in _TILES:
        ways[f"triton_{bm}x{bn}x{bk}"] = lambda bm=bm, bn=bn, bk=bk, warps=warps: grouped_mm(a, b, offs, bm, bn, bk,
                                                                                              warps)  # fmt: skip
    key = (tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), a.dtype, a.device)
    # torch's fallback reads the offsets on the host
    way = chosen_way(key, ways, _CHOSEN, syncs=frozenset({DEFAULT}), op="grouped_mm")
    return ways[way]()
