"""Attention problems: decode attention over a KV cache (L1), causal GQA attention and encoder attention blocks (L2)."""

from __future__ import annotations

from typing import Any

from ..draft import ProblemDraft
from .common import SHORT, VAR, const, problem, source, tensor, tolerance

_DECODE = '''
import torch

def run(q, k_cache, v_cache):
    b, hq, d = q.shape
    hkv = k_cache.shape[1]
    # Grouped-query attention: each cached head serves hq // hkv query heads.
    k = k_cache.repeat_interleave(hq // hkv, dim=1)
    v = v_cache.repeat_interleave(hq // hkv, dim=1)
    scores = (q.unsqueeze(2) @ k.transpose(-1, -2)).float() * d ** -0.5
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    return (probs @ v).squeeze(2)
'''

# Rotary embedding shared by the causal blocks (rotate-half layout, angles in float32).
ROPE_HELPER = '''
def apply_rope(x, positions):
    d = x.shape[-1]
    inv_freq = 1.0 / (THETA ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    angles = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    xf = x.float()
    half = d // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)
'''

ATTENTION_HELPER = '''
def causal_self_attention(h, positions, wq, bq, wk, bk, wv, bv, wo):
    s = h.shape[0]
    q = h @ wq.t()
    k = h @ wk.t()
    v = h @ wv.t()
    if bq is not None:
        q, k, v = q + bq, k + bk, v + bv
    q = apply_rope(q.view(s, Q_HEADS, HEAD_DIM), positions).transpose(0, 1)
    k = apply_rope(k.view(s, KV_HEADS, HEAD_DIM), positions).transpose(0, 1)
    v = v.view(s, KV_HEADS, HEAD_DIM).transpose(0, 1)
    group = Q_HEADS // KV_HEADS
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    o = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), is_causal=True)[0]
    return o.transpose(0, 1).reshape(s, Q_HEADS * HEAD_DIM) @ wo.t()
'''

# The end of a causal block's make_inputs: q/k/v biases when its projections have them.
QKV_BIAS_INIT = '''    if $BIAS:
        for name, n in (("bq", qd), ("bk", kvd), ("bv", kvd)):
            out[name] = (torch.randn(n, device=device) * 0.1).to($DTYPE)
    return out
'''

_CAUSAL_BLOCK = '''
import torch
import torch.nn.functional as F

Q_HEADS = $Q_HEADS
KV_HEADS = $KV_HEADS
HEAD_DIM = $HEAD_DIM
THETA = $THETA
$ROPE_HELPER$ATTENTION_HELPER
def run($ARGS):
    return causal_self_attention(x, positions, wq, $BQ, wk, $BK, wv, $BV, wo)

def make_inputs(axes, device):
    s, h, qd, kvd = axes["S"], axes["H"], axes["QD"], axes["KVD"]

    def weight(rows, cols):
        return (torch.randn(rows, cols, device=device) * cols ** -0.5).to($DTYPE)

    out = {"x": torch.randn(s, h, device=device).to($DTYPE),
           "positions": torch.arange(s, device=device, dtype=torch.int64),
           "wq": weight(qd, h), "wk": weight(kvd, h), "wv": weight(kvd, h), "wo": weight(h, qd)}
''' + QKV_BIAS_INIT

_ENCODER_BLOCK = '''
import torch
import torch.nn.functional as F

HEADS = $HEADS
BIASES = $BIASES

def run($ARGS):
    b, n, d = x.shape
    hd = d // HEADS
    q = x @ wq.t() + bq
    k = x @ wk.t()$K_BIAS_ADD
    v = x @ wv.t() + bv
    q, k, v = (t.view(b, n, HEADS, hd).transpose(1, 2) for t in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v)
    return o.transpose(1, 2).reshape(b, n, d) @ wo.t() + bo

def make_inputs(axes, device):
    b, n, d = axes["B"], axes["N"], axes["D"]
    out = {"x": torch.randn(b, n, d, device=device).to($DTYPE)}
    for w in ("wq", "wk", "wv", "wo"):
        out[w] = (torch.randn(d, d, device=device) * d ** -0.5).to($DTYPE)
    for bias in BIASES:
        out[bias] = (torch.randn(d, device=device) * 0.1).to($DTYPE)
    return out
'''


def qkv_projections(dtype: str, bias: bool) -> dict[str, dict[str, Any]]:
    """The q, k and v projection weights of a causal block, each followed by its bias when it has one."""
    out = {}
    for weight, b, rows in (("wq", "bq", "QD"), ("wk", "bk", "KVD"), ("wv", "bv", "KVD")):
        out[weight] = tensor([rows, "H"], dtype)
        if bias:
            out[b] = tensor([rows], dtype)
    return out


def causal_fragments(inputs: dict[str, Any], bias: bool, dtype: str) -> dict[str, str]:
    """The code fragments a causal block's reference template takes: arguments, helpers, q/k/v biases, dtype."""
    biases = {f"B{p}": f"b{p.lower()}" if bias else "None" for p in "QKV"}
    return {"ARGS": ", ".join(inputs), "ROPE_HELPER": ROPE_HELPER, "ATTENTION_HELPER": ATTENTION_HELPER, **biases,
            "DTYPE": f"torch.{dtype}"}


def decode_problem(*, name: str, summary: str, reference: str, q_heads: int, kv_heads: int, head_dim: int, dtype: str,
                   sizes: tuple[tuple[int, int], ...], extra: dict[str, dict[str, Any]] | None = None) -> ProblemDraft:
    """A decode-step attention problem: one query per sequence [B, HQ, D] over KV caches [B, HKV, L, D] (GQA),
    ``extra`` inputs after them; ``sizes`` are (B, L) pairs."""
    return problem(
        name=name, level="L1", op_type="attention", summary=summary,
        axes={"B": VAR, "L": VAR, "HQ": const(q_heads), "HKV": const(kv_heads), "D": const(head_dim)},
        inputs={"q": tensor(["B", "HQ", "D"], dtype), "k_cache": tensor(["B", "HKV", "L", "D"], dtype),
                "v_cache": tensor(["B", "HKV", "L", "D"], dtype), **(extra or {})},
        outputs={"out": tensor(["B", "HQ", "D"], dtype)},
        reference=reference,
        sizes=({"B": b, "L": n} for b, n in sizes), tol=tolerance(dtype, "block"),
        tags=("attention", "decode", "forward"),
    )  # fmt: skip


def decode_attention(*, q_heads: int, kv_heads: int, head_dim: int, dtype: str,
                     sizes: tuple[tuple[int, int], ...]):  # fmt: skip
    return decode_problem(
        name=f"decode_attention_q{q_heads}_kv{kv_heads}_d{head_dim}_{SHORT[dtype]}",
        summary=f"Decode-step attention: one new query per sequence over a KV cache of L tokens, {q_heads} query "
        f"heads sharing {kv_heads} KV heads of size {head_dim} (GQA), {dtype}.",
        reference=_DECODE.lstrip("\n"),
        q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, sizes=sizes,
    )  # fmt: skip


def causal_attention_block(*, hidden: int, q_heads: int, kv_heads: int, head_dim: int, theta: float, bias: bool,
                           dtype: str, sizes: tuple[int, ...]):  # fmt: skip
    name = (f"attention_block_h{hidden}_q{q_heads}_kv{kv_heads}_d{head_dim}_theta{int(theta)}"
            f"{'_qkvbias' if bias else ''}_{SHORT[dtype]}")  # fmt: skip
    inputs = {"x": tensor(["S", "H"], dtype), "positions": tensor(["S"], "int64"), **qkv_projections(dtype, bias),
              "wo": tensor(["H", "QD"], dtype)}
    return problem(
        name=name, level="L2", op_type="attention_block",
        summary=f"Self-attention block of a decoder for one prefill sequence of S tokens: q/k/v projections"
        f"{' with bias' if bias else ''}, rotary embedding (theta {theta:g}), causal SDPA with {q_heads} query heads "
        f"over {kv_heads} KV heads of {head_dim} (GQA), output projection; {dtype}, weights as inputs.",
        axes={"S": VAR, "H": const(hidden), "QD": const(q_heads * head_dim), "KVD": const(kv_heads * head_dim)},
        inputs=inputs,
        outputs={"out": tensor(["S", "H"], dtype)},
        reference=source(
            _CAUSAL_BLOCK,
            raw=causal_fragments(inputs, bias, dtype),
            Q_HEADS=q_heads, KV_HEADS=kv_heads, HEAD_DIM=head_dim, THETA=float(theta), BIAS=bias,
        ),
        sizes=({"S": s} for s in sizes), tol=tolerance(dtype, "block"),
        tags=("attention", "causal", "gqa", "forward"),
    )  # fmt: skip


def encoder_attention_block(*, hidden: int, heads: int, seq: int, k_bias: bool, dtype: str,
                            batches: tuple[int, ...]):  # fmt: skip
    name = f"encoder_attention_h{hidden}_heads{heads}_n{seq}{'' if k_bias else '_nokbias'}_{SHORT[dtype]}"
    inputs = {"x": tensor(["B", "N", "D"], dtype)}
    for w, b in (("wq", "bq"), ("wk", "bk"), ("wv", "bv"), ("wo", "bo")):
        inputs[w] = tensor(["D", "D"], dtype)
        if b != "bk" or k_bias:
            inputs[b] = tensor(["D"], dtype)
    ref = source(
        _ENCODER_BLOCK,
        raw={"ARGS": ", ".join(inputs), "DTYPE": f"torch.{dtype}", "K_BIAS_ADD": " + bk" if k_bias else ""},
        HEADS=heads, BIASES=tuple(n for n in inputs if n.startswith("b")),
    )
    return problem(
        name=name, level="L2", op_type="attention_block",
        summary=f"Bidirectional self-attention module of an encoder over {seq} tokens: q/k/v projections"
        f"{'' if k_bias else ' (no bias on k)'}, SDPA with {heads} heads of {hidden // heads}, output projection; "
        f"{dtype}, weights as inputs.",
        axes={"B": VAR, "N": const(seq), "D": const(hidden)},
        inputs=inputs,
        outputs={"out": tensor(["B", "N", "D"], dtype)},
        reference=ref,
        sizes=({"B": b} for b in batches), tol=tolerance(dtype, "block"),
        tags=("attention", "forward"),
    )  # fmt: skip
