"""Routing sites: ``topk(softmax(x), k)`` over the last dim, largest first and sorted, of float32 probabilities,
with both the weights and the indices used; the weights may be renormalised (``w / w.sum(-1, keepdim=True)``), read
as part of the site first. Other users of the probabilities keep their softmax.

Logits upcast from half precision are left alone: equal logits are common there, and the order ``torch.topk``
gives tied experts is not specified, so no kernel can be held to it (a float32 tie needs equal logits)."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op
from ..base import Sites, arg, strip_casts
from .op import SOFTMAX_TOPK


def _last(dim: object, ndim: int) -> bool:
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def _outputs(topk: Node) -> tuple[Node, Node] | None:
    """The topk's weights and indices, each one ``getitem`` node."""
    got: dict[int, Node] = {}
    for u in topk.users:
        if u.op != "call_function" or u.target is not operator.getitem or u.args[1] in got:
            return None
        got[u.args[1]] = u
    return (got[0], got[1]) if set(got) == {0, 1} else None


def _renormalised(w: Node) -> Node | None:
    """``w / w.sum(-1, keepdim=True)``: the division, when ``w``'s users spell exactly that."""
    sums = [u for u in w.users if is_op(u, "sum") and u.args[0] is w]
    for s in sums:
        dims, keep = arg(s, 1, "dim", None), arg(s, 2, "keepdim", False)
        vw = val(w)
        if not (keep and isinstance(dims, (list, tuple)) and len(dims) == 1 and _last(dims[0], vw.dim())):
            continue
        if s.kwargs.get("dtype") is not None:
            continue
        for d in s.users:
            if is_op(d, "div") and d.args[0] is w and d.args[1] is s:
                return d
    return None


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for t in [n for n in gm.graph.nodes if is_op(n, "topk")]:
        probs, k = t.args[0], t.args[1]
        vp = val(probs)
        if not is_op(probs, "_softmax") or vp is None or vp.dtype != torch.float32 or not isinstance(k, int):
            continue
        largest_sorted = arg(t, 3, "largest", True) and arg(t, 4, "sorted", True)
        if not _last(arg(t, 2, "dim", -1), vp.dim()) or not largest_sorted:
            continue
        if not _last(probs.args[1], vp.dim()) or (outs := _outputs(t)) is None:
            continue
        weights, ids = outs
        x = probs.args[0]
        vx, vi = val(x), val(strip_casts(x))
        if vx is None or vx.dtype != torch.float32 or vi is None or vi.element_size() < 4:
            continue
        ends = [(d, True)] if (d := _renormalised(weights)) is not None else []
        ends.append((weights, False))
        sites.append([Region("softmax_topk", SOFTMAX_TOPK, (x,), (w, ids), {"k": k, "renormalize": renorm})
                      for w, renorm in ends])  # fmt: skip
    return sites
