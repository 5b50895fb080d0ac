"""Group-limited router top-k in one Triton kernel: a tile of rows per program, each row's experts in registers.

Each row's scores (sigmoid, or softmax over the row) and biased choices are computed once; each group's score is
the sum of its ``group_k`` best choices, picked one at a time; the ``top_groups`` best groups are picked likewise;
the experts outside them take the fill value, and the k best are picked one at a time (among equal values the
lowest index), each with its unbiased score. One read of the logits and the bias, one write of k weights and ids:
the reference's element-wise ops, three ``topk`` calls, a scatter and a gather are a kernel or more each.

On CUDA each call shape runs the fastest that agrees with torch's way (the default, ids equal) of it and the kernel
at a few tile sizes, measured on the shape's first call (``measure.fastest``).
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from ..measure import DEFAULT, chosen_way
from ..picks import largest, pick_tiles, store_picks, top_k

MAX_EXPERTS = 1024
MAX_GROUPS = 32
MAX_K = 32
_TILES = ((2048, 4), (256, 2))  # (elements per program: rows = elements // experts, at least one; warps)
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _grouped_topk_rows(x_ptr, b_ptr, w_ptr, id_ptr, n_rows, fill, E: tl.constexpr, G: tl.constexpr,
                       GK: tl.constexpr, TOPG: tl.constexpr, K: tl.constexpr, SIGMOID: tl.constexpr,
                       HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr, G_PAD: tl.constexpr, K_PAD: tl.constexpr,
                       ROWS: tl.constexpr, EXACT_EXP: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    col_ok = cols < E
    ok = row_ok[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + rows[:, None] * E + cols[None, :], mask=ok, other=float("-inf")).to(tl.float32)
    if SIGMOID:  # as torch computes it (``1 / (1 + expf(-x))``, IEEE division): a last bit decides near-ties
        if EXACT_EXP:
            e = libdevice.exp(-x)
        else:  # Triton's interpreter has no libdevice
            e = tl.exp(-x)
        s = tl.math.div_rn(1.0, 1.0 + e)
    else:
        m = tl.where(row_ok, tl.max(x, axis=1), 0.0)
        e = tl.where(ok, tl.exp(x - m[:, None]), 0.0)
        s = e / tl.sum(e, axis=1)[:, None]
    s = tl.where(ok, s, 0.0)
    choice = s
    if HAS_BIAS:
        choice = s + tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    choice = tl.where(ok, choice, float("-inf"))
    group = cols // (E // G)
    gslots = tl.arange(0, G_PAD)
    gscore = tl.full([ROWS, G_PAD], float("-inf"), dtype=tl.float32)
    for g in tl.static_range(G):
        free = ok & (group == g)[None, :]
        total = tl.zeros([ROWS], dtype=tl.float32)
        for _ in tl.static_range(GK):
            v, i = largest(choice, free, cols, BLOCK)
            total += v
            free = free & (cols[None, :] != i[:, None])
        gscore = tl.where(gslots[None, :] == g, total[:, None], gscore)
    gfree = (gslots < G)[None, :] & row_ok[:, None]
    kept = tl.zeros([ROWS, BLOCK], dtype=tl.int1)
    for _ in tl.static_range(TOPG):
        _, gi = largest(gscore, gfree, gslots, G_PAD)
        kept = kept | (group[None, :] == gi[:, None])
        gfree = gfree & (gslots[None, :] != gi[:, None])
    masked = tl.where(ok, tl.where(kept, choice, fill), float("-inf"))
    slots, w, ids = top_k(masked, s, ok, cols, BLOCK, K, K_PAD, ROWS)
    store_picks(w_ptr, id_ptr, rows, row_ok, slots, w, ids, K)


def takes(logits: torch.Tensor, bias: Optional[torch.Tensor], k: int, groups: int, top_groups: int,
          group_k: int) -> bool:  # fmt: skip
    """Whether the kernel serves this call (shapes and dtypes only)."""
    e = logits.shape[-1] if logits.dim() else 0
    return (0 < e <= MAX_EXPERTS and 0 < groups <= MAX_GROUPS and e % groups == 0 and 0 < k <= min(MAX_K, e)
            and 0 < top_groups <= groups and 0 < group_k <= e // groups
            and logits.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and (bias is None or tuple(bias.shape) == (e,)))  # fmt: skip


def grouped_topk(logits: torch.Tensor, bias: Optional[torch.Tensor], k: int, groups: int, top_groups: int,
                 group_k: int, score: str, fill: float, tile: int = 2048,
                 num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    x = logits.contiguous()
    e = x.shape[-1]
    w, ids, n_rows, block, rows = pick_tiles(x, k, tile)
    if n_rows == 0:
        return w, ids
    b = bias.contiguous() if bias is not None else x
    _grouped_topk_rows[(triton.cdiv(n_rows, rows),)](
        x, b, w, ids, n_rows, fill, E=e, G=groups, GK=group_k, TOPG=top_groups, K=k, SIGMOID=score == "sigmoid",
        HAS_BIAS=bias is not None, BLOCK=block, G_PAD=triton.next_power_of_2(groups),
        K_PAD=triton.next_power_of_2(k), ROWS=rows, EXACT_EXP=os.environ.get("TRITON_INTERPRET") != "1",
        num_warps=num_warps,
    )  # fmt: skip
    return w, ids


def fastest_grouped_topk(logits: torch.Tensor, bias: Optional[torch.Tensor], k: int, groups: int, top_groups: int,
                         group_k: int, score: str, fill: float,
                         default: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    if not logits.is_cuda or not takes(logits, bias, k, groups, top_groups, group_k):
        return default()
    ways: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]] = {DEFAULT: default}
    for tile, warps in _TILES:
        ways[f"triton_{tile}x{warps}"] = lambda tile=tile, warps=warps: grouped_topk(
            logits, bias, k, groups, top_groups, group_k, score, fill, tile, warps)  # fmt: skip
    key = (tuple(logits.shape), logits.stride(), logits.dtype, bias is not None, k, groups, top_groups, group_k,
           score, fill, logits.device)  # fmt: skip
    return ways[chosen_way(key, ways, _CHOSEN, op="grouped_topk")]()
