"""Group-limited routing sites, read back from the final ``topk`` of experts (k, last dim, largest first, sorted):

- its input is the choice with the unkept experts filled (``masked_fill(choice, mask, c)`` or ``where``);
- the choice is the scores, or the scores plus a bias of one value per expert (views and a widening cast of it
  folded in); the scores are ``sigmoid`` or ``softmax`` over the experts of the logits (a widening cast folded in);
- the choice is also viewed as [rows, G, E / G], its ``topk(group_k)`` values summed over the last dim (or its
  ``amax``: one per group), and a ``topk(top_groups)`` of those group scores taken;
- the region's outputs are the final indices and ``gather(scores, 1, indices)``.

How the group mask is built between (a scatter into zeros, ``repeat_interleave`` or ``expand``, a bool cast) is not
read: the region check, on random logits and bias, confirms it computes the op's mask."""

from __future__ import annotations

import operator

from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op, strip_views
from ..base import Sites, arg, float32_of, is_last_dim, number
from .op import GROUPED_TOPK

_VIEWS = ("view", "reshape", "_unsafe_view")


def _topk(node: object) -> tuple[Node, int] | None:
    """(input, k) of ``topk(x, k)`` over the last dim, largest first and sorted."""
    if not is_op(node, "topk") or not isinstance(node.args[1], int):
        return None
    x = node.args[0]
    largest_sorted = arg(node, 3, "largest", True) and arg(node, 4, "sorted", True)
    if not is_last_dim(arg(node, 2, "dim", -1), x) or not largest_sorted:
        return None
    return x, node.args[1]


def _item(node: Node, i: int) -> Node | None:
    return next((u for u in node.users if u.target is operator.getitem and u.args[1] == i), None)


def _constant(x: object) -> float | None:
    """A number, or a 0-d tensor made of one (``scalar_tensor``, ``full([], c)``)."""
    if is_op(x, "scalar_tensor"):
        return number(x.args[0])
    if is_op(x, "full") and list(x.args[0]) == []:
        return number(x.args[1])
    return number(x)


def _filled(masked: object) -> tuple[Node, float] | None:
    """(choice, fill) of ``masked_fill(choice, mask, fill)`` or ``where(keep, choice, fill)``."""
    if is_op(masked, "masked_fill") and (fill := _constant(masked.args[2])) is not None:
        return masked.args[0], fill
    if is_op(masked, "where") and len(masked.args) == 3 and (fill := _constant(masked.args[2])) is not None:
        return masked.args[1], fill
    return None


def _scores(node: object) -> tuple[Node, str] | None:
    """(logits, "sigmoid" | "softmax") of the experts' scores."""
    if is_op(node, "sigmoid"):
        return float32_of(node.args[0]), "sigmoid"
    if is_op(node, "_softmax") and is_last_dim(node.args[1], node):
        return float32_of(node.args[0]), "softmax"
    return None


def _biased(choice: Node, experts: int) -> tuple[Node, Node | None] | None:
    """(scores, bias or None) of the choice."""
    if is_op(choice, "add") and len(choice.args) == 2 and all(isinstance(a, Node) for a in choice.args):
        for s, b in (choice.args, choice.args[::-1]):
            if _scores(s) is None:
                continue
            bias = next((n for n in strip_views(b) if val(n) is not None and tuple(val(n).shape) == (experts,)), None)
            if bias is not None:
                return s, float32_of(bias)
    return (choice, None) if _scores(choice) is not None else None


def _last_dims(node: Node, of: Node) -> bool:
    """``node`` reduces ``of`` over its last dim alone (``sum`` or ``amax`` with dim [-1])."""
    dims = arg(node, 1, "dim", None)
    return isinstance(dims, (list, tuple)) and len(dims) == 1 and is_last_dim(dims[0], of)


def _group_scores(v: Node) -> list[tuple[Node, int]]:
    """(group scores, group_k) read from the grouped view: ``topk(v, g).values.sum(-1)`` or ``v.amax(-1)``."""
    found = []
    for u in v.users:
        if (got := _topk(u)) is not None and (top := _item(u, 0)) is not None:
            found += [(s, got[1]) for s in top.users if is_op(s, "sum") and _last_dims(s, top)]
        elif is_op(u, "amax") and _last_dims(u, v):
            found.append((u, 1))
    return found


def _groups(choice: Node, experts: int) -> tuple[int, int, int] | None:
    """(groups, group_k, top_groups) of the group scores computed from the choice."""
    for v in choice.users:
        shape = tuple(val(v).shape) if is_op(v, *_VIEWS) and val(v) is not None else ()
        if len(shape) < 2 or shape[-2] * shape[-1] != experts:
            continue
        for summed, group_k in _group_scores(v):
            for t in summed.users:
                if (got := _topk(t)) is not None:
                    return shape[-2], group_k, got[1]
    return None


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for f in [n for n in gm.graph.nodes if _topk(n) is not None]:
        masked, k = _topk(f)
        ids = _item(f, 1)
        if ids is None or (filled := _filled(masked)) is None:
            continue
        choice, fill = filled
        experts = val(choice).shape[-1] if val(choice) is not None else 0
        if (biased := _biased(choice, experts)) is None or (grouping := _groups(choice, experts)) is None:
            continue
        scores, bias = biased
        logits, score = _scores(scores)
        gathered = next((u for u in ids.users if is_op(u, "gather") and u.args[0] is scores and u.args[2] is ids
                         and is_last_dim(u.args[1], scores)), None)  # fmt: skip
        if gathered is None:
            continue
        groups, group_k, top_groups = grouping
        consts = {"k": k, "groups": groups, "top_groups": top_groups, "group_k": group_k, "score": score, "fill": fill}
        sites.append([Region("grouped_topk", GROUPED_TOPK, (logits, bias), (gathered, ids), consts)])
    return sites
