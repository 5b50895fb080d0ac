"""Attention semantics and the matcher: which layout, softmax scale, causal diagonal and GQA head map a reference
computes, probed against the reference on the CPU (see ``attention.py``).

Layouts (q / out; k and v): ``bhsd`` q [B, H, S, D], kv [B, Hkv, Skv, D]; ``bshd`` q [B, S, H, D],
kv [B, Skv, Hkv, D]; ``bhd`` (decode) q [B, H, D], kv [B, Hkv, Skv, D]. GQA: ``interleave`` (query head h
reads kv head h // (H / Hkv), as repeat_interleave and SDPA's enable_gqa) or ``tile`` (h % Hkv, as repeat).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import torch

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import Binding

# axes of (b, h, s, d) in q/out and in k/v for each layout; None: absent (length 1)
LAYOUTS: dict[str, tuple[tuple[int | None, ...], tuple[int | None, ...]]] = {
    "bhsd": ((0, 1, 2, 3), (0, 1, 2, 3)),
    "bshd": ((0, 2, 1, 3), (0, 2, 1, 3)),
    "bhd": ((0, 1, None, 2), (0, 1, 2, 3)),
}
_FLOATS = {"float16", "bfloat16", "float32"}
_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?)")


def _dims(shape: tuple[int, ...], axes: tuple[int | None, ...]) -> tuple[int, ...]:
    return tuple(1 if a is None else shape[a] for a in axes)


def _to_bhsd(t: torch.Tensor, axes: tuple[int | None, ...]) -> torch.Tensor:
    return t.unsqueeze(2) if None in axes else t.permute(*axes)  # type: ignore[arg-type]


def _from_bhsd(t: torch.Tensor, axes: tuple[int | None, ...]) -> torch.Tensor:
    # every 4-d layout here is its own inverse permutation
    return t.squeeze(2) if None in axes else t.permute(*axes)  # type: ignore[arg-type]


def semantics(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, c: Mapping[str, Any]) -> torch.Tensor:
    """What a binding claims the reference computes, in fp32 torch (the probe's model)."""
    qa, ka = LAYOUTS[c["layout"]]
    qq, kk, vv = _to_bhsd(q, qa).float(), _to_bhsd(k, ka).float(), _to_bhsd(v, ka).float()
    g = qq.shape[1] // kk.shape[1]
    if g > 1:
        rep = (lambda t: t.repeat(1, g, 1, 1)) if c["gqa"] == "tile" else (lambda t: t.repeat_interleave(g, 1))
        kk, vv = rep(kk), rep(vv)
    s = (qq @ kk.transpose(-1, -2)) * c["scale"]
    if c["causal"]:
        sq, skv = s.shape[-2], s.shape[-1]
        keep = torch.ones(sq, skv, dtype=torch.bool).tril(skv - sq if c["causal"] == "bottom_right" else 0)
        s = s.masked_fill(~keep, float("-inf"))
    return _from_bhsd(torch.softmax(s, -1) @ vv, qa).to(q.dtype)


def _candidates(reference: str, head_dim: int, kinds: Mapping[str, tuple[bool, bool]]) -> list[dict[str, Any]]:
    """Every semantics to probe; ``kinds``: layout -> (gqa, bottom-right causal is distinct)."""
    scales = [head_dim**-0.5, 1.0, 1.0 / head_dim]
    scales += [x for x in (float(m) for m in _LITERAL.findall(reference)) if 0 < x < 1 and x not in scales]
    return [
        {"layout": lay, "causal": causal, "scale": scale, "gqa": mapping, "head_dim": head_dim}
        for lay, (gqa, bottom_right) in kinds.items()
        for causal in ((False, "top_left", "bottom_right") if bottom_right else (False, "top_left"))
        for scale in scales
        for mapping in (("interleave", "tile") if gqa else ("interleave",))
    ]


def attention_candidates(problem: Problem, sig: OpSignature) -> list[Binding]:
    """Every semantics the shapes allow (layouts, causal diagonals, scales, GQA maps); the probe picks."""
    sdpa = any(op.startswith("_scaled_dot_product") for op in sig.ops)
    if not (sdpa or (sig.has_any("_softmax", "_safe_softmax") and sig.has_any("bmm", "matmul"))):
        return []
    d = problem.definition
    if len(d.inputs) != 3 or len(d.outputs) != 1 or any(s.is_scalar for s in d.inputs.values()):
        return []
    (q, qs), (k, ks), (v, vs) = d.inputs.items()
    out = next(iter(d.outputs.values()))
    if {qs.dtype, ks.dtype, vs.dtype, out.dtype} - _FLOATS or len({qs.dtype, ks.dtype, vs.dtype}) != 1:
        return []
    if out.dtype != qs.dtype or len(ks.shape or []) != 4 or len(vs.shape or []) != 4:
        return []
    rank = len(qs.shape or [])
    layouts = [lay for lay, (qa, _) in LAYOUTS.items() if len(qa) - (None in qa) == rank]

    def sizes(w) -> dict[str, tuple[int, ...]]:
        env = d.resolve_axes(w.axes)
        return {n: tuple(s.concrete_shape(env)) for n, s in [*d.inputs.items(), *d.outputs.items()]}

    workloads = sorted(problem.workloads, key=lambda w: sum(math.prod(s) for s in sizes(w).values()))
    if not workloads:
        return []
    layouts = [lay for lay in layouts if all(_shapes_fit(sizes(w), q, k, v, out_name(problem), lay) for w in workloads)]
    kinds, facts = {}, {}
    for lay in layouts:
        qa, ka = LAYOUTS[lay]
        dims = [(_dims(sizes(w)[q], qa), _dims(sizes(w)[k], ka)) for w in workloads]
        gqa = any(qd[1] != kd[1] for qd, kd in dims)
        # bottom-right causal is top-left causal when Sq == Skv, and no mask at all when Sq == 1
        bottom_right = not all(qd[2] == kd[2] for qd, kd in dims) and not all(qd[2] == 1 for qd, _ in dims)
        kinds[lay] = (gqa, bottom_right)
        # shape facts for renderers (the CUDA decode kernel: one query per sequence, at most 8 heads per group)
        facts[lay] = {"max_sq": max(qd[2] for qd, _ in dims), "max_group": max(qd[1] // kd[1] for qd, kd in dims),
                      "dtype": str(getattr(qs.dtype, "value", qs.dtype))}  # fmt: skip
    cands = _candidates(d.reference, sizes(workloads[0])[q][-1], kinds)
    return [Binding({"q": q, "k": k, "v": v}, {**c, **facts[c["layout"]]}) for c in cands]



def probed_semantics(problem: Problem, b: Binding, inputs: Mapping[str, Any]) -> torch.Tensor:
    return semantics(*(inputs[b.roles[r]] for r in ("q", "k", "v")), b.consts)



def out_name(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def _shapes_fit(sz: Mapping[str, tuple[int, ...]], q: str, k: str, v: str, o: str, layout: str) -> bool:
    qa, ka = LAYOUTS[layout]
    b, h, _, dq = _dims(sz[q], qa)
    bk, hk, skv, dk = _dims(sz[k], ka)
    return (sz[o] == sz[q] and sz[v] == sz[k] and b == bk and dq == dk and hk > 0 and h % hk == 0
            and skv > 0)  # fmt: skip


def dedupe(bindings: list[Binding]) -> list[Binding]:
    """Candidates equal on every probe: keep one per (layout, causal, gqa); the first scale is the usual one."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for b in bindings:
        key = (b.consts["layout"], b.consts["causal"], b.consts["gqa"])
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


# Rendered helpers over a layout's axes: sizes and strides as (b, h, s, d), 1 and 0 for an absent axis.
LAYOUT_HELPERS = '''
def _dims(t, axes):
    return tuple(1 if a is None else t.shape[a] for a in axes)


def _strides(t, axes):
    return tuple(0 if a is None else t.stride(a) for a in axes)
'''
