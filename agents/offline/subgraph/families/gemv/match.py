"""Small-M linear sites: ``mm(a, w.T)`` or ``addmm(bias, a, w.T)`` (what ``F.linear`` and ``x @ w.t()`` trace
to) where a has at most ``MAX_M`` rows, w is a contiguous ``[N, K]`` tensor read transposed (``t``,
``transpose`` or ``permute``), the dtypes are half precision or fp32 and all alike, and addmm's alpha and beta are 1."""

from __future__ import annotations

from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op
from ..base import Sites
from .op import DTYPES, MAX_M, SMALL_M_LINEAR


def _transposed_weight(node: object) -> Node | None:
    """w for a node that is w ``[N, K]`` (contiguous) read as ``[K, N]``."""
    if not isinstance(node, Node):
        return None
    if is_op(node, "t"):
        pass
    elif is_op(node, "transpose"):
        if sorted(d % 2 for d in node.args[1:3]) != [0, 1]:
            return None
    elif is_op(node, "permute"):
        if [d % 2 for d in node.args[1]] != [1, 0]:
            return None
    else:
        return None
    w = node.args[0]
    v = val(w)
    if not isinstance(w, Node) or v is None or v.dim() != 2 or tuple(v.stride()) != (v.shape[1], 1):
        return None
    return w


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for n in gm.graph.nodes:
        if is_op(n, "mm") and len(n.args) == 2 and not n.kwargs:
            bias, a, wt = None, n.args[0], n.args[1]
        elif is_op(n, "addmm") and len(n.args) == 3 and n.kwargs.get("beta", 1) == 1 and n.kwargs.get("alpha", 1) == 1:
            bias, a, wt = n.args
        else:
            continue
        w = _transposed_weight(wt)
        va, vy, vb = val(a), val(n), val(bias)
        if w is None or va is None or vy is None or va.dim() != 2 or va.shape[0] > MAX_M:
            continue
        if va.dtype not in DTYPES or val(w).dtype != va.dtype or vy.dtype != va.dtype:
            continue
        if bias is not None and (vb is None or vb.dim() != 1 or vb.dtype != va.dtype or vb.shape[0] != vy.shape[1]):
            continue
        sites.append([Region("small_m_linear", SMALL_M_LINEAR, (a, w, bias), (n,))])
    return sites
