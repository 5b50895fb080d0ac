"""Block-scaled GEMM sites: ``mm(A, B.T)`` (then optionally a cast) where each operand is a low-precision (fp8)
tensor cast to float32 times a scale grid: a function of one small scale tensor through layout ops only
(``repeat_interleave``, ``expand``, views, slices), as a reference's dequantization spells it. The tile sizes
are read from the shapes (``ceil(rows / block) == scale rows``); where several fit, each is an alternative
and the region check keeps the one the reference computes."""

from __future__ import annotations

import itertools

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op, target_name
from ..base import Sites, cast_of, single_user
from .op import LOW, SCALED_MM

_LAYOUT = {"unsqueeze", "squeeze", "expand", "clone", "view", "_unsafe_view", "reshape", "slice", "alias",
           "repeat_interleave", "repeat", "index_select", "permute", "t", "transpose", "contiguous", "_to_copy",
           "arange", "select"}  # fmt: skip


def _source(node: Node) -> Node | None:
    """The one tensor ``node`` is a rearrangement of (tensors built from nothing, ``arange`` indices, aside)."""
    leaves: set[Node] = set()
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if target_name(n) in _LAYOUT:
            todo.extend(n.all_input_nodes)
        elif n.op in ("placeholder", "get_attr") or n.op == "call_function":
            leaves.add(n)
    return next(iter(leaves)) if len(leaves) == 1 else None


def _dequantized(node: object) -> tuple[Node, Node] | None:
    """(low-precision tensor, its scales) for ``q.float() * scales`` (either order)."""
    if not is_op(node, "mul") or len(node.args) != 2 or not all(isinstance(x, Node) for x in node.args):
        return None
    for q_side, s_side in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
        q = cast_of(q_side)
        vq, vs = val(q), val(q_side)
        if q is None or vq is None or vq.dtype not in LOW or vs.dtype != torch.float32 or vq.dim() != 2:
            continue
        scale = _source(s_side)
        vsc = val(scale)
        if scale is not None and vsc is not None and vsc.dim() == 2 and vsc.numel() < vq.numel():
            return q, scale
    return None


def _blocks(size: int, count: int) -> list[int]:
    """Tile sizes b with ceil(size / b) == count: the plain quotient first, then powers of two."""
    if count <= 0:
        return []
    fits = [b for b in (-(-size // count), *(1 << i for i in range(12))) if b >= 1 and -(-size // b) == count]
    return list(dict.fromkeys(fits))[:3]


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for n in gm.graph.nodes:
        if not is_op(n, "mm") or len(n.args) != 2 or not is_op(n.args[1], "t"):
            continue
        a_side, b_side = _dequantized(n.args[0]), _dequantized(n.args[1].args[0])
        if a_side is None or b_side is None:
            continue
        (a, a_scale), (b, b_scale) = a_side, b_side
        va, vas, vb, vbs = val(a), val(a_scale), val(b), val(b_scale)
        end = n
        if (u := single_user(n)) is not None and cast_of(u) is n:
            end = u
        a_blocks = list(itertools.product(_blocks(va.shape[0], vas.shape[0]), _blocks(va.shape[1], vas.shape[1])))
        b_blocks = list(itertools.product(_blocks(vb.shape[0], vbs.shape[0]), _blocks(vb.shape[1], vbs.shape[1])))
        alts = [Region("block_scaled_mm", SCALED_MM, (a, a_scale, b, b_scale), (end,),
                       {"a_block": list(ab), "b_block": list(bb), "out_dtype": val(end).dtype})
                for ab, bb in itertools.product(a_blocks, b_blocks)][:8]  # fmt: skip
        if alts:
            sites.append(alts)
    return sites
