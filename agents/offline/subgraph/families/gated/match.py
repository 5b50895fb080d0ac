"""Gated-activation sites: a multiply whose one operand is an element-wise function of a single tensor a (any
spelling: ``silu``, ``v * sigmoid(v)``, gelu written out with tanh, casts between) and whose other operand is
another tensor b (casts allowed), then optionally a cast; an activation rounded before the multiply
(``act(g.float()).to(x.dtype) * u``, or computed in half precision) is read as such first. a and b may be
halves of one tensor (split/chunk). Each site is offered with the activations its ops can spell (``_spelled``);
the region check keeps the one it computes."""

from __future__ import annotations

import itertools

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op, target_name
from ..base import Sites, cast_of, in_order, same_shape, single_user, strip_casts
from .op import ACTIVATIONS, GATED

_POINTWISE = {"mul", "add", "sub", "div", "neg", "sigmoid", "tanh", "erf", "exp", "pow", "_to_copy", "gelu",
              "silu", "relu", "reciprocal", "rsub", "clamp", "clamp_min", "maximum", "minimum", "sqrt", "log1p",
              "expm1"}  # fmt: skip


def _unary_source(node: Node) -> tuple[Node, set[Node]] | None:
    """The one tensor ``node`` is an element-wise function of (constants aside), if there is exactly one, and
    the nodes of that function."""
    leaves: set[Node] = set()
    seen: set[Node] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        if target_name(n) in _POINTWISE:
            seen.add(n)
            todo.extend(n.all_input_nodes)
        else:
            leaves.add(n)
        if len(leaves) > 1:
            return None
    return (next(iter(leaves)), seen) if leaves and node not in leaves else None


def _spelled(body: set[Node]) -> tuple[str, ...]:
    """The activations the function's ops can spell, in the order to try them: erf and tanh gelu are near
    enough at half precision to pass the region check for each other, so which one it is comes from the graph
    (``gelu``'s ``approximate``, an ``erf`` or a ``tanh``), never from the check."""
    names = {target_name(n) for n in body}
    acts: list[str] = []
    for n in body:
        if target_name(n) == "gelu":
            approximate = n.args[1] if len(n.args) > 1 else n.kwargs.get("approximate", "none")
            acts.append("gelu_tanh" if approximate == "tanh" else "gelu")
    if "erf" in names and "tanh" not in names:
        acts.append("gelu")
    if "tanh" in names and "erf" not in names:
        acts.append("gelu_tanh")
    if names & {"silu", "sigmoid"}:
        acts.append("silu")
    if "sigmoid" in names:
        acts.append("quick_gelu")
    if names & {"relu", "clamp_min", "clamp", "maximum"}:
        acts.append("relu")
    return tuple(a for a in dict.fromkeys(acts) if a in ACTIVATIONS)


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    # last first: an activation spelled with multiplies holds inner multiplies that look like sites too
    for m in reversed(in_order(gm, [n for n in gm.graph.nodes if is_op(n, "mul")])):
        if len(m.args) != 2 or not all(isinstance(a, Node) for a in m.args) or not same_shape(*m.args):
            continue
        alts: list[Region] = []
        for act_side, gate_side in ((m.args[0], m.args[1]), (m.args[1], m.args[0])):
            got = _unary_source(act_side)
            if got is None:
                continue
            a, body = got
            b = strip_casts(gate_side)
            if a is b or not same_shape(a, b, m) or not (acts := _spelled(body)):
                continue
            ends = [m]
            if (u := single_user(m)) is not None and cast_of(u) is m:
                ends.insert(0, u)
            rounded = val(act_side).dtype in (torch.float16, torch.bfloat16)  # the activation exists rounded
            act_dtypes = (val(act_side).dtype, None) if rounded else (None,)
            for end, act_dtype, act in itertools.product(ends, act_dtypes, acts):
                consts = {"act": act, "act_dtype": act_dtype, "out_dtype": val(end).dtype}
                alts.append(Region("gated", GATED, (a, b), (end,), consts))
        if alts:
            sites.append(alts)
    return sites
