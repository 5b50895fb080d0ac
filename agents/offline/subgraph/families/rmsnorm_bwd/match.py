"""RMSNorm backward sites, found by what they compute rather than how they spell it.

From each RMSNorm statistic ``rstd = rsqrt(mean(x^2) + eps)`` (``rmsnorm.match.rstd_sites``), the element-wise ops,
reductions, views and casts downstream of it make up the candidate backward. Its inputs are x and what the candidate
reads from outside x's own computations, or what those are computed from (``g * w`` is read as g and w): a tensor of
x's shape is the output's gradient (casts up to float32 folded in), a 1-D tensor over the last dim the weight
(``w.float()`` and ``w + c``, c the offset, folded in). Its outputs are a node of x's shape (dx) and, with a weight,
a 1-D one over the last dim (dw), each tried from the last such node back. Each combination is a region; the region
check (random inputs, the op against the region) keeps the first that computes the backward, with dw before without.
A forward RMSNorm has no gradient input and yields no site."""

from __future__ import annotations

import itertools

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, target_name
from ..base import Sites, cast_of, float32_of, number
from ..rmsnorm.match import rstd_sites, widened
from .op import RMSNORM_BWD, RMSNORM_BWD_DX

_THROUGH = {"mul", "add", "sub", "div", "neg", "rsqrt", "sqrt", "pow", "reciprocal", "sum", "mean", "view", "reshape",
            "_unsafe_view", "expand", "unsqueeze", "squeeze", "_to_copy", "clone", "alias", "detach"}  # fmt: skip
_LIMIT = 200  # nodes in a candidate backward: past that it is not one norm's backward
_TRIES = 3  # gradients and weights tried, and output nodes from the last back, per output: the checks stay few


def _downstream(start: Node, limit: int = _LIMIT) -> list[Node]:
    """``start`` and the nodes below it through element-wise ops, reductions, views and casts, in graph order."""
    seen, todo = {start}, [start]
    while todo and len(seen) <= limit:
        for u in todo.pop().users:
            if u not in seen and target_name(u) in _THROUGH:
                seen.add(u)
                todo.append(u)
    order = {n: i for i, n in enumerate(start.graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def _upstream(n: Node, depth: int = 4) -> list[Node]:
    """What ``n`` computes from through element-wise ops and casts (up to ``depth`` steps), sources first, then
    ``n``: the inputs a backward region may take instead of a product of them."""
    if depth == 0 or target_name(n) not in _THROUGH:
        return [n]
    return [*dict.fromkeys(a for i in n.all_input_nodes for a in _upstream(i, depth - 1)), n]


def _shape(n: object) -> tuple[int, ...] | None:
    v = val(n)
    return tuple(v.shape) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point else None


def _weight(n: Node) -> tuple[Node, float]:
    """The weight before ``+ c`` and a widening cast, and c."""
    offset = 0.0
    if target_name(n) == "add" and len(n.args) == 2 and (c := number(n.args[1])) is not None:
        n, offset = n.args[0], c
    return widened(n), offset


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for r, xf, eps in rstd_sites(gm):
        h = cast_of(xf) or xf
        shape = _shape(h)
        if shape is None:
            continue
        from_x = set(_downstream(h, 4 * _LIMIT))
        cone = [n for n in _downstream(r) if n is not r]
        read = [a for n in cone for a in n.all_input_nodes if a not in from_x and a is not h]
        outside = list(dict.fromkeys(a for n in read for a in _upstream(n)))  # ``g * w`` is read as g and w
        grads = list(dict.fromkeys(float32_of(a) for a in outside if _shape(a) == shape))[:_TRIES]
        weights = list(dict.fromkeys(_weight(a) for a in outside if _shape(a) == shape[-1:]))[:_TRIES]
        if not grads:
            continue
        dxs = [n for n in reversed(cone) if _shape(n) == shape][:_TRIES]
        dws = [n for n in reversed(cone) if _shape(n) == shape[-1:]][:_TRIES]
        alts: list[Region] = []
        for g, (w, offset) in itertools.product(grads, weights):
            for dx, dw in itertools.product(dxs, dws):
                consts = {"eps": eps, "offset": offset, "dx_dtype": val(dx).dtype, "dw_dtype": val(dw).dtype}
                alts.append(Region("rmsnorm_bwd", RMSNORM_BWD, (h, w, g), (dx, dw), consts))
        for g, (w, offset), dx in itertools.product(grads, [*weights, (None, 0.0)], dxs):
            consts = {"eps": eps, "offset": offset, "dx_dtype": val(dx).dtype}
            alts.append(Region("rmsnorm_bwd_dx", RMSNORM_BWD_DX, (h, w, g), (dx,), consts))
        if alts:
            sites.append(alts)
    return sites
