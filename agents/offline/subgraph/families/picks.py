"""Picking the k largest of a row one at a time inside a Triton kernel (the routers' top-k): each pick is the
largest value among the columns still free and the lowest column holding it, so equal values go to the lowest
index, as a stable sort would order them.

Shipped inside subgraph candidates: triton.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def largest(values, free, cols, BLOCK: tl.constexpr):
    """Per row of ``values`` [rows, BLOCK]: the largest where ``free``, and the lowest of ``cols`` holding it."""
    v = tl.max(tl.where(free, values, float("-inf")), axis=1)
    i = tl.min(tl.where(free & (values == v[:, None]), cols[None, :], BLOCK), axis=1)
    return v, i
