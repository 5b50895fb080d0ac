"""What a family is: a name and a matcher that proposes regions of an FX graph.

``find`` returns one list per site (a place in the graph where the family may be), holding alternative
readings of that site, the most complete first (e.g. with the residual add and the weight, then without):
``rewrite`` keeps the first alternative that reproduces the region on random inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch.fx import GraphModule, Node

from ..capture import val
from ..region import Region, is_op

Sites = list[list[Region]]


@dataclass(frozen=True)
class Family:
    name: str
    find: Callable[[GraphModule], Sites]


def single_user(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def other(node: Node, one: object) -> object:
    """The operand of a binary op that is not ``one``."""
    a, b = node.args[0], node.args[1]
    return b if a is one else a


def number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def cast_of(node: object) -> Node | None:
    """``x`` for ``x.to(dtype)`` (aten ``_to_copy`` with nothing but a dtype, or a strided layout and the
    device it is on already), else None."""
    if not is_op(node, "_to_copy") or not set(node.kwargs) <= {"dtype", "layout", "device"}:
        return None
    inner = val(node.args[0])
    if node.kwargs.get("layout", torch.strided) != torch.strided or inner is None:
        return None
    return node.args[0] if node.kwargs.get("device", inner.device) == inner.device else None


def float32_of(node: Node) -> Node:
    """``x`` where ``node`` is ``x.float()`` of a floating ``x`` (an op that widens its input itself computes the
    same from ``x``), else ``node``."""
    inner = cast_of(node)
    vi, vn = val(inner), val(node)
    if inner is None or vi is None or vn is None or vn.dtype != torch.float32 or not vi.dtype.is_floating_point:
        return node
    return inner


def arg(node: Node, i: int, name: str, default: object) -> object:
    """An op call's argument, given by position ``i`` or by ``name``."""
    return node.args[i] if len(node.args) > i else node.kwargs.get(name, default)


def is_last_dim(dim: object, node: object) -> bool:
    """``dim`` names the last dim of ``node``'s value (-1 or its index)."""
    v = val(node)
    return v is not None and isinstance(dim, int) and dim in (-1, v.dim() - 1)


def strip_casts(node: object) -> object:
    while (inner := cast_of(node)) is not None:
        node = inner
    return node


def same_shape(*nodes: object) -> bool:
    vals = [val(n) for n in nodes]
    return all(v is not None for v in vals) and all(tuple(v.shape) == tuple(vals[0].shape) for v in vals)


def in_order(gm: GraphModule, nodes: Sequence[Node]) -> list[Node]:
    pos = {n: i for i, n in enumerate(gm.graph.nodes)}
    return sorted(nodes, key=pos.__getitem__)
