"""Scaled-dot-product attention: a probed matcher, a Triton flash-attention kernel, a PyTorch SDPA fallback.

Matching: the op signature only pre-filters (softmax with batched matmuls, or an SDPA op). The semantics
the kernel needs (layout, softmax scale, causal flag and diagonal, which KV head serves which query head)
are then *probed*: the reference runs on the CPU on its smallest workload(s), and every candidate
semantics, computed here in fp32 with plain torch, is compared with it. Only candidates that reproduce the
reference are bound, so a binding is never a guess.

Layouts (q / out; k and v): ``bhsd`` q [B, H, S, D], kv [B, Hkv, Skv, D]; ``bshd`` q [B, S, H, D],
kv [B, Skv, Hkv, D]; ``bhd`` (decode) q [B, H, D], kv [B, Hkv, Skv, D]. GQA: ``interleave`` (query head h
reads kv head h // (H / Hkv), as repeat_interleave and SDPA's enable_gqa) or ``tile`` (h % Hkv, as repeat).

Kernel: one program per (block of packed rows, batch x kv head, kv split). The query heads that share a
kv head are packed into the M dimension (row = head-in-group * Sq + query) so a decode step reads each KV
tile once for the whole group; online softmax in the exp2 domain with fp32 m/l/acc; p is cast to the
value dtype for the second dot (as FlashAttention does). With few programs (decode) the KV range is
split over a third grid axis and a second kernel merges the partial (m, l, acc).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import torch

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import Binding, Family, Renderer, py_signature, triton_launcher
from .probe import Probe

# axes of (b, h, s, d) in q/out and in k/v for each layout; None: absent (length 1)
LAYOUTS: dict[str, tuple[tuple[int | None, ...], tuple[int | None, ...]]] = {
    "bhsd": ((0, 1, 2, 3), (0, 1, 2, 3)),
    "bshd": ((0, 2, 1, 3), (0, 2, 1, 3)),
    "bhd": ((0, 1, None, 2), (0, 1, 2, 3)),
}
TRITON_HEAD_DIMS = (16, 32, 64, 128)
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
    kinds = {}
    for lay in layouts:
        qa, ka = LAYOUTS[lay]
        dims = [(_dims(sizes(w)[q], qa), _dims(sizes(w)[k], ka)) for w in workloads]
        gqa = any(qd[1] != kd[1] for qd, kd in dims)
        # bottom-right causal is top-left causal when Sq == Skv, and no mask at all when Sq == 1
        bottom_right = not all(qd[2] == kd[2] for qd, kd in dims) and not all(qd[2] == 1 for qd, _ in dims)
        kinds[lay] = (gqa, bottom_right)
    cands = _candidates(d.reference, sizes(workloads[0])[q][-1], kinds)
    return [Binding({"q": q, "k": k, "v": v}, c) for c in cands]


def _semantics(problem: Problem, b: Binding, inputs: Mapping[str, Any]) -> torch.Tensor:
    return semantics(*(inputs[b.roles[r]] for r in ("q", "k", "v")), b.consts)


def match_attention(problem: Problem, sig: OpSignature, probe: Probe | None = None) -> list[Binding]:
    return ATTENTION.match(problem, sig, probe)


def out_name(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def _shapes_fit(sz: Mapping[str, tuple[int, ...]], q: str, k: str, v: str, o: str, layout: str) -> bool:
    qa, ka = LAYOUTS[layout]
    b, h, _, dq = _dims(sz[q], qa)
    bk, hk, skv, dk = _dims(sz[k], ka)
    return (sz[o] == sz[q] and sz[v] == sz[k] and b == bk and dq == dk and hk > 0 and h % hk == 0
            and skv > 0)  # fmt: skip


def _dedupe(bindings: list[Binding]) -> list[Binding]:
    """Candidates equal on every probe: keep one per (layout, causal, gqa); the first scale is the usual one."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for b in bindings:
        key = (b.consts["layout"], b.consts["causal"], b.consts["gqa"])
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


# ------------------------------------------------------------------------------------------------ renderers


_HELPERS = '''
def _dims(t, axes):
    return tuple(1 if a is None else t.shape[a] for a in axes)


def _strides(t, axes):
    return tuple(0 if a is None else t.stride(a) for a in axes)
'''


def render_attention_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    c = b.consts
    q, k, v, o = b.roles["q"], b.roles["k"], b.roles["v"], out_name(problem)
    qa, ka = LAYOUTS[c["layout"]]
    causal = c["causal"]
    gqa = (
        "    if H != HKV:\n        g = H // HKV\n        kk, vv = kk.repeat(1, g, 1, 1), vv.repeat(1, g, 1, 1)\n"
        if c["gqa"] == "tile"
        else "    if H != HKV:\n        g = H // HKV\n        kk, vv = kk.repeat_interleave(g, 1), vv.repeat_interleave(g, 1)\n"
    )
    mask = "None"
    if causal:
        shift = "SKV - SQ" if causal == "bottom_right" else "0"
        mask = f"torch.ones(SQ, SKV, dtype=torch.bool, device={q}.device).tril({shift})"
    return f"""import torch
import torch.nn.functional as F
{_HELPERS}

def _bhsd(t, axes):
    if None in axes:
        return t.unsqueeze(2)
    return t.permute(*axes)


{py_signature(problem)}
    QAX, KAX = {qa!r}, {ka!r}
    B, H, SQ, D = _dims({q}, QAX)
    _, HKV, SKV, _ = _dims({k}, KAX)
    qq, kk, vv = _bhsd({q}, QAX), _bhsd({k}, KAX), _bhsd({v}, KAX)
{gqa}    y = F.scaled_dot_product_attention(qq, kk, vv, attn_mask={mask}, scale={c["scale"]!r})
    {o}.copy_(y.squeeze(2) if None in QAX else y.permute(*QAX))
"""


_TRITON_KERNELS = '''
@triton.jit
def _attn_fwd(Q, K, V, O, MW, LW, AW,
              sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod,
              HKV, SQ, SKV, qk_scale, causal_shift, kv_chunk,
              GROUP: tl.constexpr, TILE_HEADS: tl.constexpr, CAUSAL: tl.constexpr, SPLIT: tl.constexpr,
              HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_s = tl.program_id(2)
    b = (pid_bh // HKV).to(tl.int64)
    hk = pid_bh % HKV
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # packed rows: (query head within the group, query)
    row_ok = rows < GROUP * SQ
    j = rows // SQ
    s = rows % SQ
    if TILE_HEADS:
        h = j * HKV + hk
    else:
        h = hk * GROUP + j
    d = tl.arange(0, HEAD_D)
    q = tl.load(Q + b * sqb + h[:, None] * sqh + s[:, None] * sqs + d[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    lo = pid_s * kv_chunk
    hi = tl.minimum(lo + kv_chunk, SKV)
    if CAUSAL:
        hi = tl.minimum(hi, tl.max(tl.where(row_ok, s, 0), 0) + causal_shift + 1)
    # a finite floor keeps exp2(m_old - m_new) defined when a whole tile of a row is masked
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    kbase = K + b * skb + hk * skh
    vbase = V + b * svb + hk * svh
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < hi
        kt = tl.load(kbase + cols[None, :] * sks + d[:, None] * skd, mask=col_ok[None, :], other=0.0)
        if DOT_F32:
            qk = tl.dot(q.to(tl.float32), kt.to(tl.float32)) * qk_scale
        else:
            qk = tl.dot(q, kt) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= s[:, None] + causal_shift)
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(vbase + cols[:, None] * svs + d[None, :] * svd, mask=col_ok[:, None], other=0.0)
        if DOT_F32:
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype).to(tl.float32), vt.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    if SPLIT:
        ws = ((pid_bh * tl.num_programs(2) + pid_s) * (GROUP * SQ)).to(tl.int64) + rows
        tl.store(MW + ws, m_i, mask=row_ok)
        tl.store(LW + ws, l_i, mask=row_ok)
        tl.store(AW + ws[:, None] * HEAD_D + d[None, :], acc, mask=row_ok[:, None])
    else:
        o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(O + b * sob + h[:, None] * soh + s[:, None] * sos + d[None, :] * sod,
                 o.to(O.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _attn_merge(O, MW, LW, AW, sob, soh, sos, sod, HKV, SQ, NSPLIT,
                GROUP: tl.constexpr, TILE_HEADS: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // HKV).to(tl.int64)
    hk = pid_bh % HKV
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < GROUP * SQ
    j = rows // SQ
    s = rows % SQ
    if TILE_HEADS:
        h = j * HKV + hk
    else:
        h = hk * GROUP + j
    d = tl.arange(0, HEAD_D)
    m = tl.full([BLOCK_M], -1.0e30, tl.float32)
    for sp in range(0, NSPLIT):
        ws = ((pid_bh * NSPLIT + sp) * (GROUP * SQ)).to(tl.int64) + rows
        m = tl.maximum(m, tl.load(MW + ws, mask=row_ok, other=-1.0e30))
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    for sp in range(0, NSPLIT):
        ws = ((pid_bh * NSPLIT + sp) * (GROUP * SQ)).to(tl.int64) + rows
        w = tl.math.exp2(tl.load(MW + ws, mask=row_ok, other=-1.0e30) - m)
        l += w * tl.load(LW + ws, mask=row_ok, other=0.0)
        acc += w[:, None] * tl.load(AW + ws[:, None] * HEAD_D + d[None, :], mask=row_ok[:, None], other=0.0)
    o = acc / tl.where(l == 0.0, 1.0, l)[:, None]
    tl.store(O + b * sob + h[:, None] * soh + s[:, None] * sos + d[None, :] * sod,
             o.to(O.dtype.element_ty), mask=row_ok[:, None])
'''


def render_attention_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    c = b.consts
    q, k, v, o = b.roles["q"], b.roles["k"], b.roles["v"], out_name(problem)
    shift = {False: "0", "top_left": "0", "bottom_right": "SKV - SQ"}[c["causal"]]
    qk_scale = c["scale"] * 1.4426950408889634  # log2(e): the kernel works in the exp2 domain
    qa, ka = LAYOUTS[c["layout"]]
    return f"""import os

import torch
import triton
import triton.language as tl
{_HELPERS}
# Triton's CPU interpreter (the tests) multiplies bf16 tiles as raw 16-bit integers; compiled code never
# takes the DOT_F32 branch.
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
{_TRITON_KERNELS}
{triton_launcher()}
_fwd_launch, _merge_launch = _Launcher(_attn_fwd), _Launcher(_attn_merge)


def _plan(q, k, v, o):
    # Grids, scalars and scratch for one layout of the inputs, kept per layout: working them out again on
    # every call is host time the judge counts.
    QAX, KAX = {qa!r}, {ka!r}
    B, H, SQ, D = _dims(q, QAX)
    _, HKV, SKV, _ = _dims(k, KAX)
    G = H // HKV
    rows = G * SQ
    if B == 0 or rows == 0:
        return None
    BM = max(16, min({p["block_m"]}, triton.next_power_of_2(rows)))
    BN = {p["block_n"]}
    grid_m = triton.cdiv(rows, BM)
    splits = 1
    if {p["split"] == "auto"}:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 132
        splits = max(1, min(triton.cdiv(2 * sms, grid_m * B * HKV), SKV // (4 * BN)))
    chunk = triton.cdiv(triton.cdiv(SKV, splits), BN) * BN
    splits = triton.cdiv(SKV, chunk)
    ws = None
    if splits > 1:
        n = B * HKV * splits * rows
        buf = torch.empty((n * (D + 2),), dtype=torch.float32, device=q.device)
        ws = (buf[:n], buf[n:2 * n], buf[2 * n:])  # (max, sum, acc): written before read on every call
    so = _strides(o, QAX)
    fwd = ((grid_m, B * HKV, splits),
           (*_strides(q, QAX), *_strides(k, KAX), *_strides(v, KAX), *so, HKV, SQ, SKV, {qk_scale!r}, {shift}, chunk),
           dict(GROUP=G, TILE_HEADS={c["gqa"] == "tile"}, CAUSAL={bool(c["causal"])}, SPLIT=splits > 1, HEAD_D=D,
                BLOCK_M=BM, BLOCK_N=BN, DOT_F32=_INTERPRETED and q.dtype == torch.bfloat16,
                num_warps={p["num_warps"]}, num_stages={p["num_stages"]}))
    merge = ((grid_m, B * HKV), (*so, HKV, SQ, splits),
             dict(GROUP=G, TILE_HEADS={c["gqa"] == "tile"}, HEAD_D=D, BLOCK_M=BM, num_warps=4))
    return fwd, merge if splits > 1 else None, ws


_PLANS = {{}}  # input layout -> _plan(...)


{py_signature(problem)}
    key = ({q}.shape, {q}.stride(), {k}.shape, {k}.stride(), {v}.stride(), {o}.stride(), {q}.dtype, {q}.device)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _plan({q}, {k}, {v}, {o})
    if plan is None:
        return
    (grid, scalars, kw), merge, ws = plan
    mw, lw, aw = ws or ({o}, {o}, {o})
    _fwd_launch(grid, {q}, {k}, {v}, {o}, mw, lw, aw, *scalars, **kw)
    if merge is not None:
        grid, scalars, kw = merge
        _merge_launch(grid, {o}, mw, lw, aw, *scalars, **kw)
"""


def triton_accepts(b: Binding) -> bool:
    return b.consts["head_dim"] in TRITON_HEAD_DIMS


ATTENTION = Family(
    name="attention",
    candidates=attention_candidates,
    semantics=_semantics,
    prune=_dedupe,
    renderers=(
        Renderer(
            "triton", True,
            {"block_m": (128, 64), "block_n": (64, 128, 32), "num_warps": (8, 4), "num_stages": (3, 2),
             "split": ("auto", "off")},
            render_attention_triton, accepts=triton_accepts,
        ),  # fmt: skip
        Renderer("pytorch", False, {}, render_attention_pytorch),
    ),
)
