"""A region of an FX graph: the nodes between some inputs and some outputs, and what a family claims it is.

A family's matcher proposes ``Region``s; ``extract`` turns one into its own ``GraphModule`` (inputs as
placeholders, outputs as a tuple) and ``reproduces`` checks it against the family's op on random inputs:
a region is replaced only when the op computes what the region computes. Nodes that depend on no input
(``arange``, ``full``: constants built inside the reference) may belong to a region; a region that reaches a
graph input it does not list is not closed and is refused.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.fx import Graph, GraphModule, Node

from .capture import val

# Closeness of an op's output to the region's, per output dtype: rounding differences of one or two units in
# the last place pass, a different computation does not.
_TOL = {torch.float32: 2e-4, torch.float64: 1e-7, torch.float16: 1e-2, torch.bfloat16: 4e-2}
_VIEWS = {"view", "_unsafe_view", "reshape", "expand", "clone", "unsqueeze", "squeeze", "contiguous", "alias"}


@dataclass(frozen=True)
class Region:
    """``inputs`` feed ``op`` (positionally, then ``consts`` as keywords); its outputs replace ``outputs``."""

    name: str  # the op's name (a family may have several: rmsnorm, add_rmsnorm)
    op: Callable[..., Any]  # the family's custom op (torch.ops.sf_subgraph.<name>)
    inputs: tuple[Node | None, ...]  # None: the op's optional tensor is absent
    outputs: tuple[Node, ...]
    consts: Mapping[str, Any] = field(default_factory=dict)
    # integer inputs that index a dimension (position in ``inputs`` -> its size): drawn below it when checked
    index_sizes: Mapping[int, int] = field(default_factory=dict)

    def describe(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.consts.items())
        names = ", ".join(n.name if n is not None else "None" for n in self.inputs)
        return f"{self.name}({names}{'; ' + consts if consts else ''})"


def target_name(node: Any) -> str:
    """``aten.mul.Tensor`` -> ``mul``; "" for anything that is not an op call."""
    if not isinstance(node, Node) or node.op != "call_function":
        return ""
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0]


def is_op(node: Any, *names: str) -> bool:
    return target_name(node) in names


def strip_views(node: Any) -> list[Node]:
    """``node`` and the nodes it is a view, expansion or copy of, nearest first (stops at anything else)."""
    chain = [node]
    while is_op(chain[-1], *_VIEWS) and isinstance(chain[-1].args[0], Node):
        chain.append(chain[-1].args[0])
    return chain


def members(inputs: Sequence[Node | None], outputs: Sequence[Node]) -> set[Node] | None:
    """Every node an output depends on, up to the inputs; None when that reaches an unlisted graph input."""
    stop, seen, todo = set(inputs), set(), list(outputs)
    while todo:
        n = todo.pop()
        if n in seen or n in stop:
            continue
        if n.op == "placeholder":
            return None
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen


def extract(gm: GraphModule, region: Region) -> GraphModule:
    """The region as a module: ``module(*inputs) -> tuple(outputs)`` (absent inputs left out)."""
    nodes = members(region.inputs, region.outputs)
    if nodes is None:
        raise ValueError(f"region {region.describe()} is not closed over its inputs")
    g = Graph()
    env: dict[Node, Node] = {}
    for i, n in enumerate(n for n in region.inputs if n is not None):
        env[n] = g.placeholder(f"in{i}")
    for n in gm.graph.nodes:
        if n in nodes:
            env[n] = g.node_copy(n, lambda a: env[a])
    g.output(tuple(env[o] for o in region.outputs))
    return GraphModule(gm, g)


def random_like(v: torch.Tensor, device: torch.device, gen: torch.Generator, high: int = 16) -> torch.Tensor:
    """Normal floats, random booleans, integers in ``[0, high)``."""
    if v.dtype.is_floating_point:
        return torch.randn(tuple(v.shape), generator=gen, dtype=torch.float32).to(device=device, dtype=v.dtype)
    if v.dtype == torch.bool:
        return torch.randint(0, 2, tuple(v.shape), generator=gen).to(device=device, dtype=torch.bool)
    return torch.randint(0, max(1, high), tuple(v.shape), generator=gen).to(device=device, dtype=v.dtype)


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    tol = _TOL.get(want.dtype, 0.0)
    g, w = got.double(), want.double()
    if not (torch.isfinite(g) == torch.isfinite(w)).all():
        return False
    fin = torch.isfinite(w)
    return bool(torch.allclose(g[fin], w[fin], rtol=tol, atol=tol)) and bool((g[~fin] == w[~fin]).all())


def reproduces(gm: GraphModule, region: Region, device: str | torch.device = "cpu", trials: int = 2,
               max_elems: int | None = None) -> bool:  # fmt: skip
    """Whether ``region.op`` matches the region on random inputs (on ``device``), every output, every trial.

    A region whose inputs and outputs hold more than ``max_elems`` elements is not checked (False); by default
    2**26 on the CPU, 2**30 on a GPU, where a candidate checks each workload's regions at its own shapes and a
    large workload's regions are the ones worth replacing."""
    dev = torch.device(device)
    limit = max_elems if max_elems is not None else (1 << 26 if dev.type == "cpu" else 1 << 30)
    vals = [val(n) for n in (*region.inputs, *region.outputs) if n is not None]
    if any(v is None for v in vals) or sum(v.numel() for v in vals) > limit:
        return False
    try:
        module = extract(gm, region)
        gen = torch.Generator().manual_seed(20251)
        for _ in range(trials):
            args = [random_like(val(n), dev, gen, region.index_sizes.get(i, 16)) if n is not None else None
                    for i, n in enumerate(region.inputs)]  # fmt: skip
            with torch.no_grad():
                want = module(*[a.clone() for a in args if a is not None])
                got = region.op(*args, **region.consts)
            got = got if isinstance(got, (tuple, list)) else (got,)
            if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
                return False
    except Exception:  # noqa: BLE001 - a region that fails to run as extracted, or an op that refuses it: no match
        return False
    return True
