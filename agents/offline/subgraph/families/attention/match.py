"""Spelled-out attention sites: ``_softmax(-1)`` whose input is (casts, views, a scalar scale, an additive mask,
``masked_fill``/``where`` with a mask, in any order) a batched matmul q @ k^T, and whose output (casts, views)
is the left operand of a batched matmul with v. K and V are taken before their head repetition
(``repeat_interleave``/``expand``) where the graph has one, so grouped heads reach the kernel unrepeated;
the plain repeated tensors are the fallback reading. A mask built from constants only (``ones().tril()``) is
offered as ``causal`` first. Attention already written as SDPA is a site only where its K/V are repeated
(``_sdpa_sites``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

from ...capture import val
from ...region import Region, is_op, members, strip_views
from ..base import Sites, cast_of, number, single_user
from .op import ATTENTION

_FILL_MIN = -1e4  # a fill value at or below this masks the score out
_SDPA = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
         "_scaled_dot_product_cudnn_attention")  # fmt: skip


def _rank(n: object) -> int:
    v = val(n)
    return v.dim() if v is not None else -1


def _softcapped(node: object) -> tuple[Node, float] | None:
    """(x, cap) for ``cap * tanh(x / cap)`` (or ``x * (1 / cap)``), else None."""
    if not is_op(node, "mul") or (cap := number(node.args[1])) is None or not is_op(node.args[0], "tanh"):
        return None
    inner = node.args[0].args[0]
    if is_op(inner, "div") and number(inner.args[1]) == cap:
        return inner.args[0], cap
    if is_op(inner, "mul") and (c := number(inner.args[1])) is not None and abs(c * cap - 1.0) < 1e-6:
        return inner.args[0], cap
    return None


@dataclass(frozen=True)
class _Scores:
    qk: Node  # the q @ k^T bmm
    scale: float
    mask: Node | None
    mode: int  # mask mode (see the op)
    mask_rank: int  # rank of the scores the mask applies to
    softcap: float


def _scores(node: object) -> _Scores | None:
    """What lies behind a softmax input: the q @ k^T bmm, then (in any order) a scale, a mask and a soft cap
    applied after the scale."""
    scale, mask, mode, mask_rank, softcap = 1.0, None, 0, -1, 0.0
    while True:
        if (inner := cast_of(node)) is not None:
            node = inner
        elif is_op(node, "view", "_unsafe_view", "reshape", "expand", "clone", "squeeze", "unsqueeze"):
            node = node.args[0]
        elif not softcap and scale == 1.0 and (capped := _softcapped(node)) is not None:
            node, softcap = capped
        elif is_op(node, "mul", "div") and (c := number(node.args[1])) is not None:
            scale = scale * (c if is_op(node, "mul") else 1.0 / c)
            node = node.args[0]
        elif is_op(node, "add") and mode == 0 and all(isinstance(a, Node) for a in node.args[:2]):
            a, b = node.args[:2]
            node, mask = (a, b) if _rank(a) >= _rank(b) else (b, a)
            mode, mask_rank = 1, _rank(node)
        elif is_op(node, "masked_fill") and mode == 0 and (number(node.args[2]) or 0.0) <= _FILL_MIN:
            node, mask, mode, mask_rank = node.args[0], node.args[1], 2, _rank(node)
        elif is_op(node, "where") and mode == 0 and (number(node.args[2]) or 0.0) <= _FILL_MIN:
            node, mask, mode, mask_rank = node.args[1], node.args[0], 3, _rank(node)
        elif is_op(node, "bmm", "matmul"):
            return _Scores(node, scale, mask, mode, mask_rank, softcap)
        else:
            return None


def _choices(node: object, rank: int) -> list[Node]:
    """Nodes ``node`` is a view or expansion of, of the given rank: farthest first, then the nearest."""
    chain = [n for n in strip_views(node) if _rank(n) == rank]
    return list(dict.fromkeys([chain[-1], chain[0]])) if chain else []


def _drops_unit_dim(node: Node) -> bool:
    """``select(t, d, 0)`` or ``squeeze(t, d)`` of a dim of size 1: a view to one rank less."""
    v = val(node.args[0])
    if v is None or len(node.args) < 2 or not isinstance(node.args[1], int) or v.shape[node.args[1]] != 1:
        return False
    return is_op(node, "squeeze") or (is_op(node, "select") and node.args[2] == 0)


def _output(bmm: Node, rank: int) -> list[Node]:
    """The bmm's result back in the caller's rank (views after it), and its cast when one follows."""
    end = bmm
    while _rank(end) != rank and (u := single_user(end)) is not None and (
        is_op(u, "view", "_unsafe_view", "reshape") or _drops_unit_dim(u)
    ):
        end = u
    if _rank(end) != rank:
        return []
    ends = [end]
    if (u := single_user(end)) is not None and cast_of(u) is end:
        ends.insert(0, u)
    return ends


def _pv(sm: Node) -> Node | None:
    node = sm
    while (u := single_user(node)) is not None:
        if is_op(u, "bmm", "matmul") and u.args[0] is node:
            return u
        if cast_of(u) is None and not is_op(u, "view", "_unsafe_view", "reshape", "expand", "clone", "unsqueeze"):
            return None
        node = u
    return None


def _bound(node: Node) -> dict[str, Any]:
    """An op call's arguments by name, defaults filled in."""
    out: dict[str, Any] = {}
    for i, a in enumerate(node.target._schema.arguments):
        if i < len(node.args) and not a.kwarg_only:
            out[a.name] = node.args[i]
        else:
            out[a.name] = node.kwargs.get(a.name, a.default_value if a.has_default_value() else None)
    return out


def _sdpa_sites(gm: GraphModule) -> Sites:
    """Attention already written as ``scaled_dot_product_attention`` (any of the aten kernels it lowers to),
    offered where its K/V are repeated heads (GQA by ``repeat_interleave``): the op takes them unrepeated.
    An SDPA call with nothing to take away is left as it is: the family's op would be the same call."""
    sites: Sites = []
    for node in gm.graph.nodes:
        if not is_op(node, *_SDPA):
            continue
        args = _bound(node)
        if number(args.get("dropout_p", 0.0)) != 0.0:
            continue
        out: Node | None = node  # the composite op returns the output; the kernels a tuple, output first
        if not is_op(node, "scaled_dot_product_attention"):
            outs = [u for u in node.users if is_op(u, "getitem") and u.args[1] == 0]
            out = outs[0] if len(outs) == 1 else None
        q, k, v = args["query"], args["key"], args["value"]
        vq = val(q)
        if out is None or vq is None:
            continue
        mask = args.get("attn_mask", args.get("attn_bias"))
        vm = val(mask)
        mode = 0 if mask is None else 3 if vm is not None and vm.dtype == torch.bool else 1
        scale = args.get("scale")
        scale = float(scale) if scale is not None else vq.shape[-1] ** -0.5
        causal = bool(args.get("is_causal", False))
        alts = []
        for rank in dict.fromkeys(_rank(n) for n in reversed(strip_views(q))):
            qs, ks, vs, ends = _choices(q, rank), _choices(k, rank), _choices(v, rank), _output(out, rank)
            if not (qs and ks and vs and ends):
                continue
            for end, (kk, vv) in itertools.product(ends, zip(ks, vs)):
                if (kk, vv) == (k, v):
                    continue
                consts = {"scale": scale, "causal": causal, "mask_mode": mode, "out_dtype": val(end).dtype}
                alts.append(Region("attention", ATTENTION, (qs[0], kk, vv, mask), (end,), consts))
        if alts:
            sites.append(alts)
    return sites


def find(gm: GraphModule) -> Sites:
    sites: Sites = _sdpa_sites(gm)
    for sm in gm.graph.nodes:
        if not is_op(sm, "_softmax", "softmax") or sm.args[1] not in (-1, _rank(sm) - 1):
            continue
        got, pv = _scores(sm.args[0]), _pv(sm)
        if got is None or pv is None:
            continue
        kt = strip_views(got.qk.args[1])[-1]
        if not is_op(kt, "transpose", "permute"):
            continue
        constant_mask = got.mask is not None and members((), (got.mask,)) is not None
        readings = ([(None, True, 0)] if constant_mask else []) + [(got.mask, False, got.mode)]
        alts = []
        # q, k, v and the output are taken at one rank: q's own first (before the views the bmm needs), then
        # any other its views pass through (a decode query [b, h, d] meets its cache at [b, h, 1, d])
        q_chain = strip_views(got.qk.args[0])
        for rank in dict.fromkeys(_rank(n) for n in reversed(q_chain)):
            qs, ks, vs = _choices(got.qk.args[0], rank), _choices(kt.args[0], rank), _choices(pv.args[1], rank)
            ends = _output(pv, rank)
            if not (qs and ks and vs and ends) or (got.softcap and not _one_query(qs[0])):
                continue
            for end, (m, causal, mm), (k, v) in itertools.product(ends, readings, zip(ks, vs)):
                # a decode reference squeezes the unit query dim before its mask: the op puts it back
                squeezed = m is not None and got.mask_rank == rank - 1
                if m is not None and got.mask_rank not in (rank, rank - 1):
                    continue
                consts = {"scale": got.scale, "causal": causal, "mask_mode": mm, "out_dtype": val(end).dtype,
                          "softcap": got.softcap, "query_squeezed": squeezed}  # fmt: skip
                alts.append(Region("attention", ATTENTION, (qs[0], k, v, m), (end,), consts))
        if alts:
            sites.append(alts)
    return sites


def _one_query(q: Node) -> bool:
    """A soft cap is taken only where one query attends (decode), which the op's Triton kernel serves; longer
    queries would run its spelled-out math, slower than what Inductor makes of the reference's."""
    v = val(q)
    return v is not None and v.dim() >= 2 and v.shape[-2] == 1
