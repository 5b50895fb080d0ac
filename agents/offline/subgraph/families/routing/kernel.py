"""Router top-k in one Triton kernel: a tile of rows per program, each row's experts held in registers.

On CUDA each call shape runs the fastest that agrees with torch's softmax and top-k (the default) of it and the
kernel at a few tile sizes, measured on the shape's first call (``measure.fastest``). The row's max and sum of
exponentials are its softmax; the k experts are then picked one at a time by their logits (the largest not yet
taken; among equal logits the lowest index), which orders them as their probabilities do without the rounding of an
approximate ``exp`` deciding near-ties, and each one's weight is ``exp(logit - max) / sum``, as the softmax
computes it. One read of the logits, one write of k weights and ids: the reference's softmax, top-k and
renormalisation are three kernels and a probability tensor written and read.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from ..measure import DEFAULT, chosen_way
from ..picks import pick_tiles, store_picks, top_k

MAX_EXPERTS = 4096  # a row in registers
MAX_K = 64  # picks unrolled in the kernel
_TILES = ((2048, 4), (512, 4), (128, 1))  # (elements per program: rows = elements // experts, at least one; warps)
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _softmax_topk_rows(x_ptr, w_ptr, id_ptr, n_rows, n_cols, K: tl.constexpr, K_PAD: tl.constexpr,
                       BLOCK: tl.constexpr, ROWS: tl.constexpr, RENORM: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    ok = row_ok[:, None] & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=ok, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    m = tl.where(row_ok, m, 0.0)
    e = tl.exp(x - m[:, None])
    total = tl.sum(tl.where(ok, e, 0.0), axis=1)
    slots, w, ids = top_k(x, e / total[:, None], ok, cols, BLOCK, K, K_PAD, ROWS)  # weights: softmax probabilities
    if RENORM:
        w = w / tl.sum(w, axis=1)[:, None]
    store_picks(w_ptr, id_ptr, rows, row_ok, slots, w, ids, K)


def takes(x: torch.Tensor, k: int) -> bool:
    """Whether ``softmax_topk`` serves this call (shapes and dtypes only)."""
    return (x.dim() >= 1 and 1 <= k <= min(MAX_K, x.shape[-1]) and x.shape[-1] <= MAX_EXPERTS
            and x.dtype in (torch.float32, torch.float16, torch.bfloat16))  # fmt: skip


def fastest_softmax_topk(x: torch.Tensor, k: int, renormalize: bool,
                         default: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The call run the fastest way agreeing with ``default`` (torch's softmax and top-k; the indices equal) of it and
    the kernel at each tile, measured on the call shape's first call outside a CUDA-graph capture."""
    if not x.is_cuda or not takes(x, k):
        return default()
    ways: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]] = {DEFAULT: default}
    for tile, warps in _TILES:
        ways[f"triton_{tile}x{warps}"] = lambda tile=tile, warps=warps: softmax_topk(x, k, renormalize, tile, warps)
    key = (tuple(x.shape), x.stride(), x.dtype, k, renormalize, x.device)
    way = chosen_way(key, ways, _CHOSEN, op="softmax_topk")
    return ways[way]()


def softmax_topk(x: torch.Tensor, k: int, renormalize: bool, tile: int = 2048,
                 num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    x = x.contiguous()
    n_cols = x.shape[-1]
    w, ids, n_rows, block, rows = pick_tiles(x, k, tile)
    if n_rows == 0:
        return w, ids
    _softmax_topk_rows[(triton.cdiv(n_rows, rows),)](x, w, ids, n_rows, n_cols, K=k, K_PAD=triton.next_power_of_2(k),
                                                     BLOCK=block, ROWS=rows, RENORM=bool(renormalize),
                                                     num_warps=num_warps)  # fmt: skip
    return w, ids
