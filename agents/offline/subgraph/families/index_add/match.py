"""Row-scatter sites: ``index_add(base, 0, index, src)``, ``scatter_add(base, 0, index[:, None].expand(-1, h),
src)`` and ``index_put(base, [index], src, accumulate=True)`` on a 2-D base and a 2-D source, the index 1-D (one
entry per source row); in place (``index_add_``, as references write it) only on a tensor nothing else reads.
``base`` built as zeros inside the reference becomes part of the region (the op starts from zeros); ``src = x *
scale[:, None]`` (either order) is read with the per-row scale as the op's, and a widening cast of ``x``
(``x.float()``) is folded in. A cast of the result, its only use, is offered as the region's end first. Each site
is offered most complete first: with the scale, then without."""

from __future__ import annotations

import itertools

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op, strip_views
from ..base import Sites, cast_of, float32_of, number, single_user
from .op import INDEX_ADD_ROWS

_ZEROS = {"zeros", "zeros_like", "new_zeros"}
_FULL = {"full", "full_like", "new_full"}


def _shape(n: object) -> tuple[int, ...] | None:
    v = val(n)
    return tuple(v.shape) if isinstance(v, torch.Tensor) else None


def _is_zeros(n: Node) -> bool:
    if is_op(n, *_ZEROS):
        return True
    if is_op(n, *_FULL):
        fill = n.args[2] if is_op(n, "new_full") and len(n.args) > 2 else n.args[1] if len(n.args) > 1 else None
        return number(fill) == 0.0
    return False


def _row_index(index: object, n_rows: int) -> Node | None:
    """The 1-D tensor of ``n_rows`` entries that a scatter's index spreads over every column, if it is one."""
    for n in strip_views(index):
        if _shape(n) in ((n_rows,), (n_rows, 1)):
            return n
        shape = _shape(n)
        if shape is not None and len(shape) == 2 and shape[0] == n_rows and shape[1] != 1 and not is_op(n, "expand"):
            return None  # a genuine per-column index
    return None


def _scatter(n: Node) -> tuple[Node, Node, Node] | None:
    """(base, index, source) of a row scatter along dim 0, else None."""
    in_place = is_op(n, "index_add_", "scatter_add_", "index_put_")
    if in_place and (not isinstance(n.args[0], Node) or len(n.args[0].users) != 1):
        return None  # in place on a tensor something else reads: the op, which writes a new one, would differ
    if is_op(n, "index_add", "index_add_"):
        if len(n.args) < 4 or n.kwargs.get("alpha", 1) != 1 or (len(n.args) > 4 and n.args[4] != 1):
            return None
        base, dim, index, src = n.args[:4]
    elif is_op(n, "scatter_add", "scatter_add_"):
        if len(n.args) < 4 or n.kwargs:
            return None
        base, dim, spread, src = n.args[:4]
        if _shape(spread) is None or _shape(spread) != _shape(src):  # a narrower index scatters fewer columns
            return None
        index = _row_index(spread, _shape(src)[0])
    elif is_op(n, "index_put", "index_put_"):
        accumulate = n.args[3] if len(n.args) > 3 else n.kwargs.get("accumulate", False)
        indices = n.args[1]
        if accumulate is not True or not isinstance(indices, (list, tuple)) or len(indices) != 1:
            return None
        base, dim, index, src = n.args[0], 0, indices[0], n.args[2]
    else:
        return None
    if not all(isinstance(x, Node) for x in (base, index, src)):
        return None
    bs, ix, ss = _shape(base), _shape(index), _shape(src)
    if bs is None or ix is None or ss is None or len(bs) != 2 or len(ss) != 2 or dim not in (0, -2):
        return None
    rows_index = ((ss[0],), (ss[0], 1)) if is_op(n, "scatter_add", "scatter_add_") else ((ss[0],),)
    if ix not in rows_index or bs[1] != ss[1] or val(index).dtype.is_floating_point or val(index).dtype == torch.bool:
        return None
    return base, index, src


def _sources(src: Node) -> list[tuple[Node, Node | None]]:
    """(x, per-row scale) readings of a scatter's source, the one with a scale first."""
    rows, out = _shape(src)[0], []
    if is_op(src, "mul") and len(src.args) == 2 and all(isinstance(a, Node) for a in src.args):
        for x, s in (src.args, src.args[::-1]):
            if _shape(x) == _shape(src) and _shape(s) == (rows, 1):
                out.append((float32_of(x), s))
    return [*out, (float32_of(src), None)]


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for n in gm.graph.nodes:
        got = _scatter(n)
        if got is None:
            continue
        base, index, src = got
        into = None if _is_zeros(base) else base
        ends = [n]
        if (u := single_user(n)) is not None and cast_of(u) is n:
            ends.insert(0, u)
        alts = []
        for end, (x, scale) in itertools.product(ends, _sources(src)):
            consts = {"rows": _shape(n)[0], "acc_dtype": val(n).dtype, "out_dtype": val(end).dtype}
            alts.append(Region("index_add_rows", INDEX_ADD_ROWS, (into, index, x, scale), (end,), consts,
                               index_sizes={1: consts["rows"]}))
        sites.append(alts)
    return sites
