"""Replace verified regions of an FX graph with their family's custom op (graph surgery).

For every family, every site it proposes, the first alternative reading that reproduces the region on random
inputs (``region.reproduces``) is replaced: one call of the op is inserted after the last of its inputs, the
region's outputs are rerouted to the op's results, and the nodes left without users are removed. Sites that
overlap a region already replaced are skipped, so a family listed first wins its nodes.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from typing import Sequence

import torch
from torch.fx import GraphModule, Node

from .families import FAMILIES
from .families.base import Family
from .region import Region, members, reproduces

_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


@dataclass(frozen=True)
class Replaced:
    """One region replaced: its family and what was bound (inputs by node name, constants)."""

    family: str
    description: str


def _insert(gm: GraphModule, region: Region) -> dict[Node, Node] | None:
    """Insert the op's call; the region's outputs -> the nodes now standing for them (None: not inserted)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    inputs = [n for n in region.inputs if n is not None]
    after = max(inputs, key=order.__getitem__)
    first_use = min((order[u] for o in region.outputs for u in o.users), default=len(order))
    if order[after] >= first_use:
        return None  # an output is used before the op's last input exists: not where one call can stand
    target = region.op.default
    with gm.graph.inserting_after(after):
        call = gm.graph.call_function(target, tuple(region.inputs), dict(region.consts))
    # the outputs' fake values carried over: a later region bound to these nodes is checked by their shapes
    call.meta["val"] = tuple(o.meta.get("val") for o in region.outputs)
    if len(region.outputs) == 1:
        call.meta["val"] = region.outputs[0].meta.get("val")
        region.outputs[0].replace_all_uses_with(call)
        return {region.outputs[0]: call}
    moved, prev = {}, call
    for i, out in enumerate(region.outputs):
        with gm.graph.inserting_after(prev):
            prev = gm.graph.call_function(operator.getitem, (call, i))
        prev.meta["val"] = out.meta.get("val")
        out.replace_all_uses_with(prev)
        moved[out] = prev
    return moved


def _rebound(region: Region, moved: dict[Node, Node]) -> Region:
    """``region`` with inputs that an earlier replacement rerouted bound to the nodes that now stand for them
    (sites are proposed before any replacement: a residual sum an ``add_rmsnorm`` now returns feeds the next)."""
    inputs = tuple(moved.get(n, n) if n is not None else None for n in region.inputs)
    return region if inputs == region.inputs else replace(region, inputs=inputs)


def _views_to_reshapes(gm: GraphModule, calls: Sequence[Node]) -> None:
    """Every ``view`` downstream of an inserted op becomes a ``reshape``: the trace wrote ``view`` where the
    replaced node's strides allowed one (an SDPA output laid out [b, s, h, d] viewed as [s, h*d]), and the
    op's contiguous output may not; ``reshape`` views where it can and copies where it must."""
    todo, seen = list(calls), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "call_function" and n.target in _VIEWS:
            n.target = torch.ops.aten.reshape.default
        todo.extend(n.users)


def rewrite(gm: GraphModule, device: str | torch.device = "cpu",
            families: Sequence[Family] = FAMILIES) -> tuple[GraphModule, list[Replaced]]:  # fmt: skip
    """``gm`` with every verified region replaced (in place), and the list of what was replaced.

    Regions are checked on ``device`` (random inputs of the region's shapes): where the op has a kernel
    there, the kernel itself is what is compared with the region."""
    done: list[Replaced] = []
    claimed: set[Node] = set()
    moved: dict[Node, Node] = {}
    calls: list[Node] = []
    for fam in families:
        for alternatives in fam.find(gm):
            for region in alternatives:
                region = _rebound(region, moved)
                nodes = members(region.inputs, region.outputs)
                if not nodes or nodes & claimed or not reproduces(gm, region, device):
                    continue
                if (now := _insert(gm, region)) is not None:
                    claimed |= nodes
                    moved.update(now)
                    calls.extend(now.values())
                    done.append(Replaced(fam.name, region.describe()))
                    break
    if done:
        _views_to_reshapes(gm, calls)
        gm.graph.eliminate_dead_code()
        # what DCE keeps as impure (an in-place ``add_`` on a fresh tensor inside a region) goes too
        for n in reversed(list(gm.graph.nodes)):
            if n in claimed and not n.users:
                gm.graph.erase_node(n)
        gm.graph.lint()
        gm.recompile()
    return gm, done
