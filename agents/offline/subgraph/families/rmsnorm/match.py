"""RMSNorm sites: rsqrt(mean(x*x | x**2, -1, keepdim) + eps) multiplied by x (x not centred: that is a
LayerNorm's), casts allowed, then optionally a cast, a multiply by a 1-D weight over the last dim (or by
``offset + weight``) and a cast. When x (before its float cast) is the sum of two tensors of its own shape,
the residual add is offered first (``add_rmsnorm``, which also returns the sum)."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op
from ..base import Sites, cast_of, number, other, same_shape, single_user, strip_casts
from .op import ADD_RMSNORM, RMSNORM


def eps_of(add: object, mean: Node) -> float | None:
    # ``add_``: torch.nn.functional.rms_norm adds eps in place to the fresh mean
    if not is_op(add, "add", "add_") or len(add.args) != 2 or add.kwargs:
        return None
    return number(other(add, mean))


def last_dim_mean(node: object) -> bool:
    """``mean(t, [-1], keepdim=True)``: the statistic is per row of the last dim."""
    if not is_op(node, "mean") or len(node.args) < 2 or (v := val(node.args[0])) is None:
        return False
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    return list(node.args[1]) in ([-1], [v.dim() - 1]) and bool(keepdim)


def centered(node: object) -> bool:
    """``x - mean(x, -1)``: the variance of a LayerNorm or GroupNorm follows, not a mean square. Its second half
    is an RMSNorm of the centred x, but this family covers neither, and replacing that half alone would split
    what Inductor fuses whole."""
    if not is_op(node, "sub") or not last_dim_mean(node.args[1]):
        return False
    return strip_casts(node.args[1].args[0]) is strip_casts(node.args[0])  # x.float() may be written twice


def square_of(node: object) -> Node | None:
    if is_op(node, "mul") and node.args[0] is node.args[1] and isinstance(node.args[0], Node):
        return node.args[0]
    if is_op(node, "pow") and number(node.args[1]) == 2.0 and isinstance(node.args[0], Node):
        return node.args[0]
    return None


def _weight_of(mul: Node, n: Node) -> tuple[Node, float] | None:
    """The weight a tail multiply applies (and its offset: 1 for ``1 + w``), when it is 1-D over the last dim."""
    w = other(mul, n)
    if not isinstance(w, Node):
        return None
    offset = 0.0
    if is_op(w, "add") and any(number(a) == 1.0 for a in w.args):
        offset, w = 1.0, next(a for a in w.args if isinstance(a, Node))
    w = widened(w)
    vw, vn = val(w), val(n)
    if vw is None or vn is None or vw.dim() != 1 or vw.shape[0] != vn.shape[-1]:
        return None
    return w, offset


def widened(w: Node) -> Node:
    """The weight before a lossless cast up to float32 (``w.float()``): the op widens it itself."""
    inner = cast_of(w)
    vi, vw = val(inner), val(w)
    if inner is None or vi is None or vw is None or vw.dtype != torch.float32:
        return w
    return inner if vi.dtype in (torch.float16, torch.bfloat16, torch.float32) else w


def _readings(x: Node, normed: Node, eps: float) -> list[tuple[Node, dict, Node | None]]:
    """(end node, constants, weight) for each tail that may close the site, longest first."""
    end, cast_first = normed, False
    steps = [(end, None, 0.0)]
    if (u := single_user(end)) is not None and cast_of(u) is end:
        end, cast_first = u, True
        steps.append((end, None, 0.0))
    if (u := single_user(end)) is not None and is_op(u, "mul") and (wo := _weight_of(u, end)) is not None:
        end = u
        steps.append((end, *wo))
        if (u := single_user(end)) is not None and cast_of(u) is end:
            steps.append((u, *wo))
    # whether the normalised value is rounded before the weight multiplies it is read from the graph (a cast
    # between them), not left to the region check: at half precision both readings pass its tolerance
    return [
        (node, {"eps": eps, "offset": offset, "cast_before_weight": cast_first and w is not None,
                "out_dtype": val(node).dtype}, w)
        for node, w, offset in reversed(steps)
    ]  # fmt: skip


def rstd_sites(gm: GraphModule) -> list[tuple[Node, Node, float]]:
    """(``rsqrt(mean(xf * xf, -1, keepdim) + eps)``, xf, eps) for each such node whose x is not centred (the
    backward family starts from these too)."""
    found = []
    for r in gm.graph.nodes:
        if not is_op(r, "rsqrt"):
            continue
        mean = r.args[0].args[0] if is_op(r.args[0], "add", "add_") else None
        if not last_dim_mean(mean) or (eps := eps_of(r.args[0], mean)) is None:
            continue
        xf = square_of(mean.args[0])
        if xf is not None and not centered(cast_of(xf) or xf):
            found.append((r, xf, eps))
    return found


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for r, xf, eps in rstd_sites(gm):
        normed = next((u for u in r.users if is_op(u, "mul") and other(u, r) is xf), None)
        if normed is None:
            continue
        h = cast_of(xf) or xf
        alts: list[Region] = []
        res = is_op(h, "add") and len(h.args) == 2 and not h.kwargs and same_shape(h, *h.args)
        for end, consts, w in _readings(xf, normed, eps):
            if res:
                alts.append(Region("add_rmsnorm", ADD_RMSNORM, (*h.args, w), (end, h), consts))
            alts.append(Region("rmsnorm", RMSNORM, (h, w), (end,), consts))
        sites.append(alts)
    return sites
