"""RoPE sites, three spellings, each optionally followed by a cast:

- ``x * cos + rotate(x) * sin`` (operands in either order, casts between): rotate(x) is
  ``cat(-x[..., h:], x[..., :h], -1)`` (half-split, h = half the last dim) or ``stack(-x[..., 1::2],
  x[..., ::2], -1)`` viewed back to x's shape (interleaved);
- pairwise: ``cat | stack(x1 * cos - x2 * sin, x2 * cos + x1 * sin)`` over the halves or the even/odd columns
  of x (cos and sin one value per pair);
- complex: ``view_as_real(view_as_complex(pairs of x) * freqs)`` viewed back to x's shape.

Where x is the first ``rot_dim`` columns of a tensor X and the result is concatenated with the rest of X's
columns (partial rotary), the whole of it is offered first. cos, sin and freqs are the region's inputs: how
they were computed stays outside. x is taken before a widening cast to float32 first (the op widens it
itself), else as it is. Columns are sliced (``x[..., a:b:s]``) or split (``chunk``, ``split``)."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op
from ..base import Sites, cast_of, is_last_dim, number, same_shape, single_user, strip_casts
from .op import ROPE, ROPE_COMPLEX

_VIEW_OPS = ("view", "_unsafe_view", "reshape", "clone", "contiguous")

Piece = tuple[Node, int, int, int]  # (source, start, end, step) along the source's last dim


def _dim_arg(node: Node, default: int, pos: int = 1) -> object:
    return node.args[pos] if len(node.args) > pos else node.kwargs.get("dim", default)


def _piece(node: object) -> Piece | None:
    """Which columns of its source ``node`` is: a last-dim slice, or one part of a last-dim split."""
    if is_op(node, "slice") and isinstance(node.args[0], Node):
        src = node.args[0]
        defaults = (0, None, None, 1)  # aten.slice(self, dim=0, start=None, end=None, step=1)
        dim, start, end, step = (*node.args[1:], *defaults[len(node.args) - 1 :])
        if not is_last_dim(dim, src):
            return None
        size = val(src).shape[-1]
        start = 0 if start is None else (start + size if start < 0 else min(start, size))
        end = size if end is None else (end + size if end < 0 else min(end, size))
        return src, start, end, 1 if step is None else step
    if node is None or getattr(node, "target", None) is not operator.getitem:
        return None
    split, i = node.args
    if not is_op(split, "split", "split_with_sizes") or not is_last_dim(_dim_arg(split, 0, 2), split.args[0]):
        return None
    size = val(split.args[0]).shape[-1]
    sizes = split.args[1] if is_op(split, "split_with_sizes") else [split.args[1]] * -(-size // split.args[1])
    start = sum(sizes[:i])
    return split.args[0], start, min(start + sizes[i], size), 1


def _halves(a: object, b: object, interleaved: bool) -> Node | None:
    """The tensor whose first half (even columns) ``a`` is and whose second half (odd columns) ``b`` is."""
    pa, pb = _piece(a), _piece(b)
    if pa is None or pb is None or pa[0] is not pb[0]:
        return None
    size = val(pa[0]).shape[-1]
    if size % 2:
        return None
    want = ((0, size, 2), (1, size, 2)) if interleaved else ((0, size // 2, 1), (size // 2, size, 1))
    return pa[0] if (pa[1:], pb[1:]) == want else None


def _negated(node: object) -> object:
    if is_op(node, "neg"):
        return node.args[0]
    if is_op(node, "mul") and number(node.args[1]) == -1.0:
        return node.args[0]
    return None


def _joined(node: object) -> tuple[list[object], bool] | None:
    """(parts, interleaved) for ``cat(parts, -1)`` or ``stack(parts, -1)`` viewed to the parts' rank."""
    if is_op(node, "cat") and is_last_dim(_dim_arg(node, 0), node):
        return list(node.args[0]), False
    stack = node
    while is_op(stack, *_VIEW_OPS):
        stack = stack.args[0]
    if stack is not node and is_op(stack, "stack") and is_last_dim(_dim_arg(stack, 0), stack):
        if val(node) is not None and val(node).dim() == val(stack).dim() - 1:
            return list(stack.args[0]), True
    return None


def _rotation(node: object) -> tuple[Node, bool] | None:
    """(x, interleaved) when ``node`` is rotate(x): (-x2, x1) joined, half-split or interleaved."""
    node = strip_casts(node)
    if (got := _joined(node)) is None or len(got[0]) != 2:
        return None
    (neg_x2, x1), interleaved = got
    src = _halves(x1, _negated(neg_x2), interleaved)
    return (src, interleaved) if src is not None and same_shape(src, node) else None


def _inputs(x: Node) -> list[Node]:
    """x before a widening cast to float32 (the op widens it), then x itself."""
    inner, vx = cast_of(x), val(x)
    if inner is not None and vx.dtype == torch.float32 and val(inner).dtype in (torch.float16, torch.bfloat16):
        return [inner, x]
    return [x]


def _tail(node: Node) -> list[Node]:
    """``node`` and, when its one user casts it, that cast: longest first."""
    u = single_user(node)
    return [u, node] if u is not None and cast_of(u) is node else [node]


def _partial(x: Node, ends: list[Node]) -> list[tuple[Node, Node, int]]:
    """(X, end, rot_dim) where x is X[..., :rot_dim] and one of ``ends`` is concatenated with X[..., rot_dim:]."""
    got = _piece(strip_casts(x))
    if got is None or got[1] != 0 or got[3] != 1:
        return []
    whole, rot_dim = got[0], got[2]
    out = []
    for e in ends:
        cat = single_user(e)
        if not is_op(cat, "cat") or len(cat.args[0]) != 2 or cat.args[0][0] is not e:
            continue
        if not is_last_dim(_dim_arg(cat, 0), cat):
            continue
        rest = _piece(strip_casts(cat.args[0][1]))
        if rest is None or strip_casts(rest[0]) is not strip_casts(whole):
            continue
        if rest[1:] == (rot_dim, val(whole).shape[-1], 1):
            out.extend((whole, end, rot_dim) for end in _tail(cat))
    return out


def _readings(x: Node, ends: list[Node]) -> list[tuple[Node, Node, int]]:
    """(x input, end, rot_dim) for each reading of a site, the partial-rotary ones first."""
    out = [(xi, end, rot) for whole, end, rot in _partial(x, ends) for xi in _inputs(strip_casts(whole))]
    out += [(xi, end, val(x).shape[-1]) for end in ends for xi in _inputs(x)]
    return [(xi, end, rot) for xi, end, rot in out if same_shape(xi, end)]


def _factors(node: object) -> list[tuple[Node, Node]]:
    """Both orders of a multiply's two tensor operands."""
    if not is_op(node, "mul") or len(node.args) != 2 or not all(isinstance(a, Node) for a in node.args):
        return []
    a, b = node.args
    return [(a, b), (b, a)]


def _regions(x: Node, cos: Node, sin: Node, end: Node, interleaved: bool, pair_cos: bool) -> list[Region]:
    return [
        Region("rope", ROPE, (xi, cos, sin), (e,), {"rot_dim": rot_dim, "interleaved": interleaved,
                                                    "pair_cos": pair_cos, "out_dtype": val(e).dtype})
        for xi, e, rot_dim in _readings(x, _tail(end))
    ]  # fmt: skip


def _rotated_site(add: Node) -> list[Region]:
    """``x * cos + rotate(x) * sin``."""
    alts: list[Region] = []
    a, b = add.args[:2]
    for m_cos, m_sin in ((a, b), (b, a)):
        for rotated, sin in _factors(m_sin):
            if (got := _rotation(rotated)) is None:
                continue
            src, interleaved = got
            for x, cos in _factors(m_cos):
                if strip_casts(x) is strip_casts(src):
                    alts += _regions(x, cos, sin, add, interleaved, False)
    return alts


def _pairwise_site(joined: Node) -> list[Region]:
    """``cat | stack(x1 * cos - x2 * sin, x2 * cos + x1 * sin)``."""
    got = _joined(joined)
    if got is None or len(got[0]) != 2:
        return []
    (first, second), interleaved = got
    if not is_op(first, "sub") or not is_op(second, "add") or first.kwargs or second.kwargs:
        return []
    alts: list[Region] = []
    for (x1, cos), (x2, sin) in ((f, g) for f in _factors(first.args[0]) for g in _factors(first.args[1])):
        x = _halves(x1, x2, interleaved)
        others = {frozenset(second.args[0].args), frozenset(second.args[1].args)} if all(
            is_op(n, "mul") for n in second.args[:2]) else set()  # fmt: skip
        if x is not None and others == {frozenset((x2, cos)), frozenset((x1, sin))}:
            alts += _regions(x, cos, sin, joined, interleaved, True)
    return alts


def _pairs_source(pairs: Node, shape: tuple[int, ...]) -> Node | None:
    """The nearest tensor of ``shape`` that ``pairs`` (x viewed as [..., d/2, 2]) is a view or cast of."""
    n = pairs
    while is_op(n, *_VIEW_OPS) or cast_of(n) is not None:
        n = n.args[0]
        if val(n) is not None and tuple(val(n).shape) == shape:
            return n
    return None


def _complex_site(real: Node) -> list[Region]:
    """``view_as_real(view_as_complex(x as pairs) * freqs)`` viewed back to x's shape."""
    mul, out = real.args[0], single_user(real)
    if not is_op(out, "view", "_unsafe_view", "reshape") or val(out) is None:
        return []
    alts: list[Region] = []
    for vc, freqs in _factors(mul):
        if not is_op(vc, "view_as_complex") or (x := _pairs_source(vc.args[0], tuple(val(out).shape))) is None:
            continue
        for xi, end, rot_dim in _readings(x, _tail(out)):
            consts = {"rot_dim": rot_dim, "out_dtype": val(end).dtype}
            alts.append(Region("rope_complex", ROPE_COMPLEX, (xi, freqs), (end,), consts))
    return alts


def find(gm: GraphModule) -> Sites:
    sites: Sites = []
    for n in gm.graph.nodes:
        if is_op(n, "add") and len(n.args) == 2 and not n.kwargs and all(isinstance(a, Node) for a in n.args):
            alts = _rotated_site(n)
        elif is_op(n, "cat", "view", "_unsafe_view", "reshape"):
            alts = _pairwise_site(n)
        elif is_op(n, "view_as_real"):
            alts = _complex_site(n)
        else:
            continue
        if alts:
            sites.append(alts)
    return sites
