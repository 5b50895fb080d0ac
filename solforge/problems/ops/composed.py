"""Compositions the model cuts do not produce: fused residual add + norm, RoPE variants (interleaved, partial
rotary, packed sequences), a linear with an epilogue, decode attention over ragged KV caches, causal
attention with QK-norm, and the two data-dependent halves of an MoE layer (dispatch and combine)."""

from __future__ import annotations

from typing import Any

from ..draft import ProblemDraft
from .attention import decode_problem
from .common import SHORT, VAR, Rows, const, eps_tag, expr, problem, source, tensor, tolerance, with_init
from .elementwise import GELU, rope_problem
from .linear import projection_inputs

# Ids and permutations must match exactly; gathered rows are copies.
EXACT = {"max_atol": 0.0, "max_rtol": 0.0, "required_matched_ratio": 1.0}

ACTIVATIONS = {
    **GELU,
    "none": "def act(v):\n    return v\n",
    "relu": "def act(v):\n    return torch.relu(v)\n",
    "relu2": "def act(v):\n    return torch.relu(v) ** 2\n",
}

_ADD_NORM = '''
import torch

LAYER = $LAYER
AFFINE = $AFFINE
UNIT_OFFSET = $UNIT_OFFSET

def run($ARGS):
    # The residual stream stays in the model dtype: the sum is rounded once, then normalised in float32.
    h = x + residual
    hf = h.float()
    if LAYER:
        hf = hf - hf.mean(dim=-1, keepdim=True)
    y = hf * torch.rsqrt((hf * hf).mean(dim=-1, keepdim=True) + eps)
    if AFFINE:
        y = y * (weight.float() + (1.0 if UNIT_OFFSET else 0.0))
        if LAYER:
            y = y + bias.float()
    return y.to(x.dtype), h
'''

_ROPE = '''
import random

import torch

THETA = $THETA
ROTARY_DIM = $ROTARY_DIM
INTERLEAVED = $INTERLEAVED
MAX_POSITION = $MAX_POSITION

def rotate(x, cos, sin):
    xf = x.float()
    rot, rest = xf[..., :ROTARY_DIM], xf[..., ROTARY_DIM:]
    if INTERLEAVED:
        # GPT-J layout: channels (2i, 2i + 1) form one pair.
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    else:
        # NeoX layout: channel i pairs with channel i + ROTARY_DIM / 2.
        half = ROTARY_DIM // 2
        x1, x2 = rot[..., :half], rot[..., half:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    # Channels past the rotary part pass through unchanged.
    return torch.cat((out, rest), dim=-1).to(x.dtype)

def run(q, k, positions):
    inv_freq = 1.0 / (THETA ** (torch.arange(0, ROTARY_DIM, 2, dtype=torch.float32, device=q.device) / ROTARY_DIM))
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    return rotate(q, cos, sin), rotate(k, cos, sin)

def make_inputs(axes, device):
    t = axes["T"]
    # Several sequences packed into one batch of tokens, each a contiguous run of positions. The layout is
    # drawn in Python from the seed the caller gave torch, so it needs no tensor values (meta tensors work).
    rng = random.Random(torch.initial_seed())
    cuts = sorted(rng.randint(0, t) for _ in range(rng.randint(0, 3)))
    runs = []
    for a, b in zip([0, *cuts], [*cuts, t]):
        start = rng.randint(0, max(MAX_POSITION - (b - a), 0))
        runs.append(torch.arange(start, start + b - a, dtype=torch.int64, device=device))
    return {
        "q": torch.randn(t, axes["HQ"], axes["D"], device=device).to($DTYPE),
        "k": torch.randn(t, axes["HKV"], axes["D"], device=device).to($DTYPE),
        "positions": torch.cat(runs),
    }
'''

_LINEAR_EPILOGUE = '''
import torch

$ACT
def run($ARGS):
    # The GEMM rounds to the model dtype; the epilogue works in float32 and rounds once.
    y = (x @ weight.t()).float()
    if $BIAS:
        y = y + bias.float()
    y = act(y)
    if $RESIDUAL:
        y = y + residual.float()
    return y.to(x.dtype)
'''

_DECODE_RAGGED = '''
import random

import torch

SOFTCAP = $SOFTCAP

def run(q, k_cache, v_cache, cache_lens):
    b, hq, d = q.shape
    hkv, length = k_cache.shape[1], k_cache.shape[2]
    k = k_cache.repeat_interleave(hq // hkv, dim=1)
    v = v_cache.repeat_interleave(hq // hkv, dim=1)
    scores = (q.unsqueeze(2) @ k.transpose(-1, -2)).squeeze(2).float() * d ** -0.5
    if SOFTCAP:
        scores = SOFTCAP * torch.tanh(scores / SOFTCAP)
    # Sequence i attends to its first cache_lens[i] cached tokens; the rest of its cache is stale.
    valid = torch.arange(length, device=q.device)[None, :] < cache_lens[:, None].long()
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    return (probs.unsqueeze(2) @ v).squeeze(2)

def make_inputs(axes, device):
    b, length = axes["B"], axes["L"]
    lens = torch.randint(1, length + 1, (b,), device=device, dtype=torch.int32)
    full = random.Random(torch.initial_seed()).randrange(b)
    lens[full] = length  # one sequence fills its cache
    shape = (b, axes["HKV"], length, axes["D"])
    return {
        "q": torch.randn(b, axes["HQ"], axes["D"], device=device).to($DTYPE),
        "k_cache": torch.randn(*shape, device=device).to($DTYPE),
        "v_cache": torch.randn(*shape, device=device).to($DTYPE),
        "cache_lens": lens,
    }
'''

_PREFILL = '''
import torch
import torch.nn.functional as F

Q_HEADS = $Q_HEADS
KV_HEADS = $KV_HEADS
EPS = $EPS

def head_rmsnorm(x, weight):
    # QK-norm: RMSNorm over each head's channels before the scores (Qwen3 / OLMo-2 style).
    xf = x.float()
    return weight * (xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + EPS)).to(x.dtype)

def run($ARGS):
    if $QK_NORM:
        q, k = head_rmsnorm(q, q_norm), head_rmsnorm(k, k_norm)
    group = Q_HEADS // KV_HEADS
    qh = q.transpose(0, 1).unsqueeze(0)
    kh = k.transpose(0, 1).repeat_interleave(group, dim=0).unsqueeze(0)
    vh = v.transpose(0, 1).repeat_interleave(group, dim=0).unsqueeze(0)
    o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)[0]
    return o.transpose(0, 1).contiguous()
'''

_MOE_DISPATCH = '''
import torch

EXPERTS = $EXPERTS
TOP_K = $TOP_K

def run(x, expert_ids):
    flat = expert_ids.reshape(-1)
    # A stable sort by expert: each expert's rows form one contiguous segment, in token order.
    order = torch.argsort(flat, stable=True)
    token_index = order // TOP_K
    counts = torch.bincount(flat, minlength=EXPERTS)
    return x[token_index], token_index, counts

def make_inputs(axes, device):
    t, h = axes["T"], axes["H"]
    # Top-k of skewed random scores: distinct experts per token, some experts far busier than others.
    skew = torch.randn(EXPERTS, device=device) * 1.5
    ids = torch.topk(torch.randn(t, EXPERTS, device=device) + skew, TOP_K, dim=-1).indices
    return {"x": torch.randn(t, h, device=device).to($DTYPE), "expert_ids": ids}
'''

_MOE_COMBINE = '''
import torch

TOP_K = $TOP_K
SCATTER = $SCATTER

def run(expert_out, token_index, weights):
    t = token_index.shape[0] // TOP_K
    h = expert_out.shape[1]
    # Weighted sum of every token's TOP_K expert rows, accumulated in float32.
    rows = expert_out.float() * weights[:, None]
    out = torch.zeros(t, h, dtype=torch.float32, device=expert_out.device)
    if SCATTER:
        out.scatter_add_(0, token_index[:, None].expand(-1, h), rows)
    else:
        out.index_add_(0, token_index, rows)
    return out.to(expert_out.dtype)

def make_inputs(axes, device):
    t, h, e = axes["T"], axes["H"], axes["E"]
    ids = torch.topk(torch.randn(t, e, device=device), TOP_K, dim=-1).indices.reshape(-1)
    order = torch.argsort(ids, stable=True)
    gate = torch.softmax(torch.randn(t, TOP_K, device=device), dim=-1).reshape(-1)
    return {
        "expert_out": torch.randn(t * TOP_K, h, device=device).to($DTYPE),
        "token_index": order // TOP_K,
        "weights": gate[order],
    }
'''


def add_norm(*, hidden: int, eps: float, dtype: str, rows: Rows, layer: bool, affine: bool, unit_offset: bool):
    norm = "layernorm" if layer else "rmsnorm"
    variant = "_noaffine" if not affine else ("_unit_offset" if unit_offset else "")
    name = f"add_{norm}{variant}_h{hidden}_{eps_tag(eps)}{rows.tag}_{SHORT[dtype]}"
    shape = [*rows.names, "H"]
    inputs = {"x": tensor(shape, dtype), "residual": tensor(shape, dtype)}
    if affine:
        inputs["weight"] = tensor(["H"], dtype)
        if layer:
            inputs["bias"] = tensor(["H"], dtype)
    inputs["eps"] = tensor(None, "float32")
    scale = "no affine" if not affine else ("scale stored as 1 + w" if unit_offset else "affine")
    return problem(
        name=name, level="L1", op_type=f"add_{norm}",
        summary=f"Residual add then {'LayerNorm' if layer else 'RMSNorm'} over {hidden} features ({scale}, eps {eps}"
        f", {dtype}); returns the normalised value and the updated residual stream.",
        axes={**rows.axis_defs, "H": const(hidden)},
        inputs=inputs,
        outputs={"y": tensor(shape, dtype), "residual_out": tensor(shape, dtype)},
        reference=source(_ADD_NORM, raw={"ARGS": ", ".join(inputs)}, LAYER=layer, AFFINE=affine,
                         UNIT_OFFSET=unit_offset),
        sizes=rows.sizes, tol=tolerance(dtype, "elementwise"), scalars={"eps": eps},
        tags=("norm", "residual", "forward"),
    )  # fmt: skip


def rope(*, q_heads: int, kv_heads: int, head_dim: int, rotary_dim: int, theta: float, interleaved: bool,
         max_position: int, dtype: str, rows: Rows):  # fmt: skip
    layout = "interleaved" if interleaved else "halfsplit"
    partial = f"_rot{rotary_dim}" if rotary_dim != head_dim else ""
    return rope_problem(
        name=f"rope_{layout}_q{q_heads}_kv{kv_heads}_d{head_dim}{partial}_theta{int(theta)}_{SHORT[dtype]}",
        summary=f"Rotary position embedding ({layout} pairs, theta {theta:g}) on the first {rotary_dim} of "
        f"{head_dim} channels of {q_heads} query and {kv_heads} key heads, {dtype}. Tokens come from up to four "
        f"packed sequences, each a contiguous run of positions inside a {max_position}-token window.",
        reference=source(_ROPE, raw={"DTYPE": f"torch.{dtype}"}, THETA=float(theta), ROTARY_DIM=rotary_dim,
                         INTERLEAVED=interleaved, MAX_POSITION=max_position),
        q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, rows=rows,
    )  # fmt: skip


def linear_epilogue(*, in_features: int, out_features: int, bias: bool, act: str, residual: bool, dtype: str,
                    rows: Rows):  # fmt: skip
    parts = ("_bias" if bias else "") + (f"_{act}" if act != "none" else "") + ("_residual" if residual else "")
    name = f"linear{parts}_k{in_features}_n{out_features}{rows.tag}_{SHORT[dtype]}"
    inputs = projection_inputs(bias=bias, dtype=dtype, rows=rows)
    if residual:
        inputs["residual"] = tensor([*rows.names, "N"], dtype)
    formula = f"{act}(x W^T{' + b' if bias else ''}){' + residual' if residual else ''}"
    return problem(
        name=name, level="L1", op_type="linear",
        summary=f"Projection {in_features} -> {out_features} with a fused epilogue: y = {formula}, {dtype}.",
        axes={**rows.axis_defs, "K": const(in_features), "N": const(out_features)},
        inputs=inputs,
        outputs={"y": tensor([*rows.names, "N"], dtype)},
        reference=with_init(source(_LINEAR_EPILOGUE, raw={"ARGS": ", ".join(inputs), "ACT": ACTIVATIONS[act]},
                                   BIAS=bias, RESIDUAL=residual), inputs, dtype),
        sizes=rows.sizes, tol=tolerance(dtype, "gemm"),
        tags=("gemm", "epilogue", "forward"),
    )  # fmt: skip


def decode_attention_ragged(*, q_heads: int, kv_heads: int, head_dim: int, softcap: float, dtype: str,
                            sizes: tuple[tuple[int, int], ...]):  # fmt: skip
    cap = f"_softcap{int(softcap)}" if softcap else ""
    return decode_problem(
        name=f"decode_attention_ragged_q{q_heads}_kv{kv_heads}_d{head_dim}{cap}_{SHORT[dtype]}",
        summary=f"Decode-step attention over KV caches of different lengths: one query per sequence, sequence i "
        f"attends to its first cache_lens[i] of L cached tokens; {q_heads} query heads over {kv_heads} KV heads of "
        f"{head_dim}{f', logits soft-capped at {softcap:g}' if softcap else ''}; {dtype}.",
        reference=source(_DECODE_RAGGED, raw={"DTYPE": f"torch.{dtype}"}, SOFTCAP=float(softcap) if softcap else None),
        q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, sizes=sizes,
        extra={"cache_lens": tensor(["B"], "int32")},
    )  # fmt: skip


def prefill_attention(*, q_heads: int, kv_heads: int, head_dim: int, qk_norm: bool, eps: float, dtype: str,
                      sizes: tuple[int, ...]):  # fmt: skip
    name = (f"causal_attention{'_qknorm' if qk_norm else ''}_q{q_heads}_kv{kv_heads}_d{head_dim}"
            f"{f'_{eps_tag(eps)}' if qk_norm else ''}_{SHORT[dtype]}")  # fmt: skip
    inputs = {"q": tensor(["S", "HQ", "D"], dtype), "k": tensor(["S", "HKV", "D"], dtype),
              "v": tensor(["S", "HKV", "D"], dtype)}
    if qk_norm:
        inputs |= {"q_norm": tensor(["D"], dtype), "k_norm": tensor(["D"], dtype)}
    return problem(
        name=name, level="L1", op_type="attention",
        summary=f"Causal prefill attention over one sequence of S tokens, {q_heads} query heads over {kv_heads} KV "
        f"heads of {head_dim}{f', RMSNorm of each q and k head first (QK-norm, eps {eps})' if qk_norm else ''}; "
        f"{dtype}.",
        axes={"S": VAR, "HQ": const(q_heads), "HKV": const(kv_heads), "D": const(head_dim)},
        inputs=inputs,
        outputs={"out": tensor(["S", "HQ", "D"], dtype)},
        reference=with_init(source(_PREFILL, raw={"ARGS": ", ".join(inputs), "QK_NORM": str(qk_norm)},
                                   Q_HEADS=q_heads, KV_HEADS=kv_heads, EPS=eps), inputs, dtype),
        sizes=({"S": s} for s in sizes), tol=tolerance(dtype, "block"),
        tags=("attention", "causal", "prefill", "forward"),
    )  # fmt: skip


def _routed_rows(half: str, *, summary: str, inputs: dict[str, dict[str, Any]], outputs: dict[str, dict[str, Any]],
                 reference: str, tol: dict[str, float], tags: tuple[str, ...], hidden: int, experts: int, top_k: int,
                 dtype: str, rows: Rows, how: str = "") -> ProblemDraft:  # fmt: skip
    """One half (dispatch or combine) of an MoE layer around its experts: the T * K (token, slot) pairs of a
    top-k routing over ``experts``, as rows of ``hidden`` features."""
    return problem(
        name=f"moe_{half}{f'_{how}' if how else ''}_h{hidden}_e{experts}_k{top_k}_{SHORT[dtype]}", level="L1",
        op_type=f"moe_{half}", summary=summary,
        axes={**rows.axis_defs, "H": const(hidden), "E": const(experts), "K": const(top_k), "TK": expr("T * K")},
        inputs=inputs,
        outputs=outputs,
        reference=reference,
        sizes=rows.sizes, tol=tol,
        tags=tags,
    )  # fmt: skip


def moe_dispatch(*, hidden: int, experts: int, top_k: int, dtype: str, rows: Rows):
    return _routed_rows(
        "dispatch",
        summary=f"MoE dispatch: sort the (token, slot) pairs of a top-{top_k} routing over {experts} experts by "
        f"expert (stable), gather the token rows ({hidden} features, {dtype}) in that order, and count each "
        f"expert's tokens (bincount).",
        inputs={"x": tensor(["T", "H"], dtype), "expert_ids": tensor(["T", "K"], "int64")},
        outputs={"rows": tensor(["TK", "H"], dtype), "token_index": tensor(["TK"], "int64"),
                 "counts": tensor(["E"], "int64")},
        reference=source(_MOE_DISPATCH, raw={"DTYPE": f"torch.{dtype}"}, EXPERTS=experts, TOP_K=top_k),
        tol=EXACT, tags=("moe", "sort", "gather", "forward"),
        hidden=hidden, experts=experts, top_k=top_k, dtype=dtype, rows=rows,
    )  # fmt: skip


def moe_combine(*, hidden: int, experts: int, top_k: int, scatter: bool, dtype: str, rows: Rows):
    how = "scatter_add" if scatter else "index_add"
    return _routed_rows(
        "combine", how=how,
        summary=f"MoE combine: expert output rows (sorted by expert, {hidden} features, {dtype}) weighted by their "
        f"routing weights and summed back into their tokens ({how}, float32 accumulation), top-{top_k} of "
        f"{experts} experts.",
        inputs={"expert_out": tensor(["TK", "H"], dtype), "token_index": tensor(["TK"], "int64"),
                "weights": tensor(["TK"], "float32")},
        outputs={"y": tensor(["T", "H"], dtype)},
        reference=source(_MOE_COMBINE, raw={"DTYPE": f"torch.{dtype}"}, TOP_K=top_k, SCATTER=scatter),
        tol=tolerance(dtype, "elementwise"), tags=("moe", "scatter", "forward"),
        hidden=hidden, experts=experts, top_k=top_k, dtype=dtype, rows=rows,
    )  # fmt: skip


_MOE_EXPERT_LOOP = '''
import torch

EXPERTS = $EXPERTS
TOP_K = $TOP_K
RENORMALIZE = $RENORMALIZE

$ACT
def run(x, router_logits, w_gate_up, w_down):
    weights, ids = torch.topk(torch.softmax(router_logits.float(), dim=-1), TOP_K, dim=-1)
    if RENORMALIZE:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    # One expert at a time over the tokens routed to it (nonzero), as the eager Hugging Face layers run.
    for e in range(EXPERTS):
        token, slot = torch.nonzero(ids == e, as_tuple=True)
        if token.numel() == 0:
            continue
        gate, up = (x[token] @ w_gate_up[e].t()).chunk(2, dim=-1)
        h = (act(gate.float()) * up.float()).to(x.dtype)
        out.index_add_(0, token, (h @ w_down[e].t()).float() * weights[token, slot, None])
    return out.to(x.dtype)

def make_inputs(axes, device):
    t, h, i, e = axes["T"], axes["H"], axes["I"], axes["E"]
    return {
        "x": torch.randn(t, h, device=device).to($DTYPE),
        "router_logits": torch.randn(t, e, device=device) * 2.0,
        "w_gate_up": (torch.randn(e, 2 * i, h, device=device) * h ** -0.5).to($DTYPE),
        "w_down": (torch.randn(e, h, i, device=device) * i ** -0.5).to($DTYPE),
    }
'''


def moe_expert_loop(*, hidden: int, intermediate: int, experts: int, top_k: int, renormalize: bool, act: str,
                    dtype: str, rows: Rows):  # fmt: skip
    label = {"silu": "swiglu", "tanh": "geglu_tanh"}[act]
    name = (f"moe_expert_loop_{label}_h{hidden}_i{intermediate}_e{experts}_k{top_k}"
            f"{'_renorm' if renormalize else ''}_{SHORT[dtype]}")  # fmt: skip
    return problem(
        name=name, level="L2", op_type="moe_layer",
        summary=f"MoE experts from router logits: softmax top-{top_k} of {experts}"
        f"{' renormalised' if renormalize else ''}, then expert by expert the tokens routed to it (nonzero) through a fused gate/up {label} MLP "
        f"({hidden} -> {intermediate} -> {hidden}), weighted and index-added back in float32; {dtype}.",
        axes={**rows.axis_defs, "H": const(hidden), "I": const(intermediate), "E": const(experts),
              "I2": expr("2 * I")},
        inputs={"x": tensor(["T", "H"], dtype), "router_logits": tensor(["T", "E"], "float32"),
                "w_gate_up": tensor(["E", "I2", "H"], dtype), "w_down": tensor(["E", "H", "I"], dtype)},
        outputs={"y": tensor(["T", "H"], dtype)},
        reference=source(_MOE_EXPERT_LOOP, raw={"ACT": GELU[act], "DTYPE": f"torch.{dtype}"}, EXPERTS=experts,
                         TOP_K=top_k, RENORMALIZE=renormalize),
        sizes=rows.sizes, tol=tolerance(dtype, "block"),
        tags=("moe", "nonzero", "gemm", "forward"),
    )  # fmt: skip
