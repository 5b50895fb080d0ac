"""Family ops that store straight into the judge's output buffers.

A rewritten graph returns some of its outputs straight from a family op (``add_rmsnorm``'s normalised value
and residual sum, a backward's gradients). Run in destination-passing form, each such result would be copied
into the judge's buffer by a kernel of its own after the op: for a memory-bound family that copy reads and
writes the output once more (on an H100, RMSNorm with its residual took 0.28 ms against Inductor's 0.14 ms).
Here each such op becomes its ``_into`` twin (``ops.py``), handed the output buffer (viewed to the result's
shape, for a result the graph only reshapes) and, for a result nothing returns, a fresh one; every other
output is returned as before and copied.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch.fx import GraphModule, Node

from .ops import into_of

_aten = torch.ops.aten
# views that keep a contiguous tensor's element order (a buffer viewed back through them is the same memory)
_RESHAPES = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default, _aten.squeeze.dim,
             _aten.squeeze.dims, _aten.squeeze.default, _aten.unsqueeze.default, _aten.flatten.using_ints)  # fmt: skip


@dataclass(frozen=True)
class Destination:
    """What the judge's buffer for one output is: only a contiguous buffer of the result's dtype and size is
    handed to an op."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    contiguous: bool

    @staticmethod
    def of(t: torch.Tensor) -> "Destination":
        return Destination(tuple(t.shape), t.dtype, t.is_contiguous())


@dataclass(frozen=True)
class Written:
    """``gm(*inputs, *outputs)`` stores the outputs at ``direct`` itself and returns the others, in order."""

    gm: GraphModule
    direct: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.direct)


def _result(node: Any) -> tuple[Node, int | None] | None:
    """(family call, result index or None for a single result) that ``node`` is, through reshapes."""
    while isinstance(node, Node) and node.op == "call_function" and node.target in _RESHAPES:
        node = node.args[0]
    if not isinstance(node, Node) or node.op != "call_function":
        return None
    if node.target is operator.getitem and isinstance(node.args[0], Node) and into_of(node.args[0].target):
        return node.args[0], node.args[1]
    return (node, None) if into_of(node.target) is not None else None


def _vals(call: Node) -> list[Any]:
    val = call.meta.get("val")
    return list(val) if isinstance(val, (tuple, list)) else [val]


def _mutated_later(call: Node) -> bool:
    """True when a result of ``call`` (or a getitem of it) feeds an op that writes its inputs."""
    users = [u for g in call.users for u in ([g] + list(g.users) if g.target is operator.getitem else [g])]
    return any(getattr(getattr(u.target, "_schema", None), "is_mutable", False) for u in users)


def write_into(gm: GraphModule, destinations: Sequence[Destination], device: torch.device) -> Written:
    """``gm`` (returning one value per destination) as a function of its inputs and the output buffers; ``gm``
    itself is left as it is. Nothing is handed over where the output count differs or no op result fits.
    Buffers for results no output takes are made on ``device``."""
    graph = torch.fx.Graph()
    env: dict[Node, Node] = {}
    old_out = next(n for n in gm.graph.nodes if n.op == "output")
    returned = old_out.args[0]
    values = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    if len(values) != len(destinations):
        return Written(gm, ())
    chosen: dict[tuple[Node, int | None], int] = {}  # (call, result) -> output position
    for i, (v, dst) in enumerate(zip(values, destinations)):
        found = _result(v)
        if found is None or found in chosen or not dst.contiguous or _mutated_later(found[0]):
            continue
        vals = _vals(found[0])
        val = vals[found[1] or 0]
        fits = val.dtype == dst.dtype and val.numel() == math.prod(dst.shape)
        if fits and all(isinstance(x, torch.Tensor) for x in vals):
            chosen[found] = i
    if not chosen:
        return Written(gm, ())
    calls = {c for c, _ in chosen}
    for n in gm.graph.find_nodes(op="placeholder"):
        env[n] = graph.placeholder(n.name)
        env[n].meta = dict(n.meta)
    outs = [graph.placeholder(f"solforge_out_{i}") for i in range(len(destinations))]
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n in calls:
            env[n] = _call_into(graph, n, env, chosen, outs, device)
            continue
        if n.op == "call_function" and n.target is operator.getitem and n.args[0] in calls:
            env[n] = env[n.args[0]][n.args[1]]
            continue
        env[n] = graph.node_copy(n, lambda a: env[a])
    direct = tuple(sorted(chosen.values()))
    kept = [torch.fx.map_arg(v, lambda a: env[a]) for i, v in enumerate(values) if i not in direct]
    graph.output(tuple(kept))
    return Written(GraphModule(gm, graph), direct)


def _call_into(graph: torch.fx.Graph, call: Node, env: dict[Node, Any], chosen: dict, outs: list[Node],
               device: torch.device) -> Any:  # fmt: skip
    """The twin's call for ``call``: its results' buffers (an output's, viewed to the result's shape, or a fresh
    one), as a list standing for the results (a single result: the buffer itself)."""
    vals = _vals(call)
    single = not isinstance(call.meta.get("val"), (tuple, list))
    buffers = []
    for k, val in enumerate(vals):
        pos = chosen.get((call, None if single else k))
        if pos is not None:
            buffers.append(graph.call_method("view", (outs[pos], tuple(val.shape))))
        else:
            buffers.append(graph.call_function(torch.empty, (tuple(val.shape),),
                                               {"dtype": val.dtype, "device": device}))  # fmt: skip
    args = torch.fx.map_arg(call.args, lambda a: env[a])
    kwargs = torch.fx.map_arg(call.kwargs, lambda a: env[a])
    graph.call_function(into_of(call.target), args, {**kwargs, "outs": buffers})
    return buffers[0] if single else buffers
