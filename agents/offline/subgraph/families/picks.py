"""Picking the k largest of a row one at a time inside a Triton kernel (the routers' top-k): each pick is the
largest value among the columns still free and the lowest column holding it, so equal values go to the lowest
index, as a stable sort would order them; each pick is put in its slot of a [rows, K_PAD] tile of weights and
indices, stored once at the end.

Shipped inside subgraph candidates: torch and triton.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def pick_tiles(x: torch.Tensor, k: int, tile: int) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """For picks over the last dim of ``x``: the float32 weights and int64 indices to fill ([..., k]), the rows,
    the row's block (a power of two) and the rows a program takes (``tile`` elements, at least one row)."""
    n_cols = x.shape[-1]
    shape = (*x.shape[:-1], k)
    w = torch.empty(shape, dtype=torch.float32, device=x.device)
    ids = torch.empty(shape, dtype=torch.int64, device=x.device)
    block = triton.next_power_of_2(max(n_cols, 1))
    return w, ids, x.numel() // max(n_cols, 1), block, triton.next_power_of_2(max(1, tile // block))


@triton.jit
def largest(values, free, cols, BLOCK: tl.constexpr):
    """Per row of ``values`` [rows, BLOCK]: the largest where ``free``, and the lowest of ``cols`` holding it."""
    v = tl.max(tl.where(free, values, float("-inf")), axis=1)
    i = tl.min(tl.where(free & (values == v[:, None]), cols[None, :], BLOCK), axis=1)
    return v, i


@triton.jit
def placed(w, ids, slots, j, weight, i):
    """``w`` and ``ids`` [rows, K_PAD] with slot ``j`` of each row holding ``weight`` and index ``i``."""
    here = slots[None, :] == j
    return tl.where(here, weight[:, None], w), tl.where(here, i.to(tl.int64)[:, None], ids)


@triton.jit
def top_k(scores, weights, free, cols, BLOCK: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr,
          ROWS: tl.constexpr):  # fmt: skip
    """The ``K`` largest ``scores`` [ROWS, BLOCK] of each row among ``free``, in order: (slots, their ``weights`` at
    the picked columns [ROWS, K_PAD], the columns [ROWS, K_PAD]), for ``store_picks``."""
    slots = tl.arange(0, K_PAD)
    w = tl.zeros([ROWS, K_PAD], dtype=tl.float32)
    ids = tl.zeros([ROWS, K_PAD], dtype=tl.int64)
    for j in tl.static_range(K):
        _, i = largest(scores, free, cols, BLOCK)
        w, ids = placed(w, ids, slots, j, tl.sum(tl.where(cols[None, :] == i[:, None], weights, 0.0), axis=1), i)
        free = free & (cols[None, :] != i[:, None])
    return slots, w, ids


@triton.jit
def store_picks(w_ptr, id_ptr, rows, row_ok, slots, w, ids, K: tl.constexpr):
    """The first ``K`` slots of each row's picks, stored at ``row * K`` (rows past the end left out)."""
    out = rows[:, None] * K + slots[None, :]
    keep = row_ok[:, None] & (slots[None, :] < K)
    tl.store(w_ptr + out, w, mask=keep)
    tl.store(id_ptr + out, ids, mask=keep)
