"""The reference as an aten-level FX graph, for one set of example inputs (one input signature).

``make_fx`` with fake tensors: shapes, dtypes and devices only, so capturing a large workload allocates
nothing. Non-tensor arguments are specialised into the graph (a scalar ``eps`` becomes a literal), which is
why a graph belongs to one input signature. References with data-dependent ops (``nonzero``, boolean indexing,
``.item()``) do not trace to such a graph: ``capture`` raises ``NotCapturable`` and the caller runs the
reference as it is. Calls whose fake-tensor rule refuses what the real op takes are traced as stand-ins
(``stand_ins.py``), and so is ``F.one_hot``.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .stand_ins import STAND_INS, with_one_hot


class NotCapturable(Exception):
    """The reference did not trace to an FX graph with fake tensors."""


def capture(fn: Callable[..., Any], args: Sequence[Any]) -> torch.fx.GraphModule:
    """``fn`` traced on ``args`` (real tensors of any size: only their metadata is read)."""
    try:
        with torch.no_grad():
            gm = make_fx(with_one_hot(fn), tracing_mode="fake", decomposition_table=STAND_INS)(*args)
    except Exception as e:  # noqa: BLE001 - any tracing failure means: no graph, run the reference as is
        raise NotCapturable(f"{type(e).__name__}: {str(e).strip()[:300]}") from e
    for node in gm.graph.nodes:
        if _data_dependent(node.meta.get("val")):
            # fake tensors trace ``x[mask]`` or ``.item()`` to unbacked symbols: a graph of no fixed shapes,
            # which neither the matchers nor one CUDA graph can take
            raise NotCapturable(f"data-dependent value at {node.name} ({node.format_node()[:200]})")
    return gm


def _data_dependent(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_data_dependent(x) for x in v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(v, torch.Tensor):
        return not all(isinstance(d, int) for d in (*v.shape, *v.stride()))
    return False


def val(node: Any) -> torch.Tensor | None:
    """The fake tensor a node produces (``meta['val']``), or None for non-tensor nodes and constants."""
    v = getattr(node, "meta", {}).get("val") if isinstance(node, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None
