"""Sampled configurations for the problem generator: one sampler per family, each drawing a model-like
configuration (hidden sizes, heads and GQA ratios, head dims, eps, rope theta, dtypes, token counts) from a
``random.Random`` and building the problem with the op builders.

Every sampler returns a ``Sample``: the draft with a generous ladder of workloads (the generator drops those
over its GPU budget) and the tensor-core MACs of a workload as a function of its resolved axes, so the budget
sees compute as well as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any, Callable

from .draft import ProblemDraft
from .ops import attention, blocks, composed, elementwise, linear, moe, norms
from .ops.common import token_rows

Env = dict[str, int]


@dataclass(frozen=True)
class Sample:
    family: str
    kind: str  # what reports group by (``kind:<kind>`` tag)
    config: dict[str, Any]
    draft: ProblemDraft
    macs: Callable[[Env], int]
    compute_dtype: str  # the dtype the reference's matmuls run in (prices the MACs)
    data_dependent: bool = False  # the SOL model must trace it on real inputs (its size is capped)


# Hidden sizes of published models, power-of-two or not; half the draws take any multiple of 64 instead.
MODEL_HIDDEN = (256, 384, 512, 640, 768, 896, 1024, 1152, 1280, 1536, 1792, 2048, 2304, 2560, 2880, 3072, 3584,
                4096, 5120, 6144, 7168, 8192)  # fmt: skip
HEAD_DIMS = (64, 80, 96, 128, 256)
EPS = (1e-5, 1e-6, 1e-5, 1e-6, 1e-8, 1e-12)
THETAS = (10000, 50000, 100000, 160000, 500000, 1000000, 5000000)
ODD_SMALL = (3, 5, 7, 9, 11, 13, 15)


def pick_hidden(rng: Random, lo: int = 256, hi: int = 8192) -> int:
    if rng.random() < 0.5:
        return rng.choice([h for h in MODEL_HIDDEN if lo <= h <= hi])
    return 64 * rng.randint(lo // 64, hi // 64)


def pick_dtype(rng: Random, fp32: bool = True) -> str:
    options = ["bfloat16", "bfloat16", "float16"] + (["float32"] if fp32 else [])
    return rng.choice(options)


def pick_intermediate(rng: Random, hidden: int) -> int:
    ratio = rng.choice((2.0, 8 / 3, 3.0, 3.5, 4.0, 5.375))
    step = rng.choice((64, 128, 256))
    return max(step, round(hidden * ratio / step) * step)


def pick_heads(rng: Random, max_q: int = 64) -> tuple[int, int, int]:
    """(query heads, KV heads, head dim): MHA, GQA of several ratios, or MQA."""
    head_dim = rng.choice(HEAD_DIMS)
    pattern = rng.choice(("mha", "gqa", "gqa", "mqa"))
    if pattern == "mha":
        kv = q = rng.choice((4, 6, 8, 12, 14, 16, 20, 24, 32))
    elif pattern == "mqa":
        kv, q = 1, rng.choice((4, 8, 12, 16, 28, 32))
    else:
        kv = rng.choice((2, 4, 8, 16))
        q = kv * rng.choice((2, 3, 4, 5, 7, 8))
    return min(q, max_q - max_q % kv), kv, head_dim


def token_ladder(rng: Random) -> tuple[int, ...]:
    """Decode sizes (1, a small odd count, a few dozen), then one size per octave up to 16384, jittered so
    most are not powers of two."""
    sizes = {1, rng.choice(ODD_SMALL), rng.randrange(17, 64, 2)}
    for anchor in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
        sizes.add(anchor if rng.random() < 0.3 else rng.randint(anchor * 3 // 4, anchor * 5 // 4))
    return tuple(sorted(sizes))


def decode_pairs(rng: Random) -> tuple[tuple[int, int], ...]:
    """(batch, cache length) pairs from one short sequence to large batches over long caches."""
    odd = rng.choice(ODD_SMALL)
    pairs = {
        (1, rng.randint(17, 200)), (1, rng.randint(900, 2100)), (1, rng.randint(12000, 32768)),
        (odd, rng.randint(300, 700)), (odd, rng.randint(3000, 5000)), (rng.randint(12, 20), rng.randint(1500, 2600)),
        (rng.randint(28, 40), rng.randint(6000, 9000)), (rng.randint(48, 80), rng.randint(700, 1300)),
        (rng.randint(96, 160), rng.randint(250, 600)), (rng.randint(2, 6), rng.randint(20000, 40000)),
    }  # fmt: skip
    return tuple(sorted(pairs))


def _rows(rng: Random):
    return token_rows(token_ladder(rng))


def _none(_: Env) -> int:
    return 0


# ------------------------------------------------------------------------------------------- families


def rmsnorm(rng: Random) -> Sample:
    cfg = dict(hidden=pick_hidden(rng), eps=rng.choice(EPS), dtype=pick_dtype(rng), unit_offset=rng.random() < 0.3)
    return Sample("rmsnorm", "rmsnorm", cfg, norms.rmsnorm(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def rmsnorm_bwd(rng: Random) -> Sample:
    cfg = dict(hidden=pick_hidden(rng), eps=rng.choice(EPS), dtype=pick_dtype(rng), unit_offset=rng.random() < 0.3)
    draft = norms.rmsnorm(rows=_rows(rng), backward=True, **cfg)
    return Sample("rmsnorm_bwd", "rmsnorm_bwd", cfg, draft, _none, cfg["dtype"])


def layernorm(rng: Random) -> Sample:
    cfg = dict(hidden=pick_hidden(rng), eps=rng.choice(EPS), dtype=pick_dtype(rng), affine=rng.random() < 0.7)
    return Sample("layernorm", "layernorm", cfg, norms.layernorm_fwd(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def add_norm(rng: Random) -> Sample:
    layer = rng.random() < 0.4
    affine = rng.random() < 0.8
    cfg = dict(hidden=pick_hidden(rng), eps=rng.choice(EPS), dtype=pick_dtype(rng), layer=layer, affine=affine,
               unit_offset=affine and not layer and rng.random() < 0.4)  # fmt: skip
    return Sample("add_norm", "add_norm", cfg, composed.add_norm(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def rope(rng: Random) -> Sample:
    q, kv, d = pick_heads(rng)
    rotary = d if rng.random() < 0.6 else rng.choice([r for r in (d // 4, d // 2, 3 * d // 4) if r % 2 == 0])
    cfg = dict(q_heads=q, kv_heads=kv, head_dim=d, rotary_dim=rotary, theta=rng.choice(THETAS),
               interleaved=rng.random() < 0.5, max_position=rng.choice((4096, 8192, 32768, 131072)),
               dtype=pick_dtype(rng))  # fmt: skip
    return Sample("rope", "rope", cfg, composed.rope(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def decode_attention(rng: Random) -> Sample:
    q, kv, d = pick_heads(rng)
    cfg = dict(q_heads=q, kv_heads=kv, head_dim=d, softcap=rng.choice((0, 0, 0, 30, 50)), dtype=pick_dtype(rng))
    draft = composed.decode_attention_ragged(sizes=decode_pairs(rng), **cfg)
    return Sample("decode_attention", "decode_attention", cfg, draft,
                  lambda e: 2 * e["B"] * e["HQ"] * e["L"] * e["D"], cfg["dtype"])  # fmt: skip


def prefill_attention(rng: Random) -> Sample:
    q, kv, d = pick_heads(rng)
    cfg = dict(q_heads=q, kv_heads=kv, head_dim=d, qk_norm=rng.random() < 0.5, eps=rng.choice((1e-5, 1e-6)),
               dtype=pick_dtype(rng))  # fmt: skip
    draft = composed.prefill_attention(sizes=token_ladder(rng), **cfg)
    return Sample("prefill_attention", "prefill_attention", cfg, draft,
                  lambda e: 2 * e["S"] * e["S"] * e["HQ"] * e["D"], cfg["dtype"])  # fmt: skip


def _attention_macs(e: Env) -> int:
    s, h, qd, kvd = e["S"], e["H"], e["QD"], e["KVD"]
    return s * h * (2 * qd + 2 * kvd) + 2 * s * s * qd


def attention_block(rng: Random) -> Sample:
    q, kv, d = pick_heads(rng, max_q=48)
    cfg = dict(hidden=pick_hidden(rng, 512, 5120), q_heads=q, kv_heads=kv, head_dim=d, theta=rng.choice(THETAS),
               bias=rng.random() < 0.4, dtype=pick_dtype(rng))  # fmt: skip
    draft = attention.causal_attention_block(sizes=token_ladder(rng), **cfg)
    return Sample("attention_block", "attention_block", cfg, draft, _attention_macs, cfg["dtype"])


def decoder_layer(rng: Random) -> Sample:
    q, kv, d = pick_heads(rng, max_q=32)
    h = pick_hidden(rng, 512, 4096)
    cfg = dict(hidden=h, q_heads=q, kv_heads=kv, head_dim=d, intermediate=pick_intermediate(rng, h),
               theta=rng.choice(THETAS), eps=rng.choice((1e-5, 1e-6)), bias=rng.random() < 0.3,
               dtype=pick_dtype(rng))  # fmt: skip
    draft = blocks.decoder_layer(sizes=token_ladder(rng), **cfg)
    return Sample("decoder_layer", "decoder_layer", cfg, draft,
                  lambda e: _attention_macs(e) + 3 * e["S"] * e["H"] * e["I"], cfg["dtype"])  # fmt: skip


def gated_mlp(rng: Random) -> Sample:
    h = pick_hidden(rng, 256, 6144)
    cfg = dict(hidden=h, intermediate=pick_intermediate(rng, h), act=rng.choice(("silu", "silu", "tanh")),
               dtype=pick_dtype(rng))  # fmt: skip
    return Sample("gated_mlp", "mlp", cfg, blocks.gated_mlp(rows=_rows(rng), **cfg),
                  lambda e: 3 * e["T"] * e["H"] * e["I"], cfg["dtype"])  # fmt: skip


def gelu_mlp(rng: Random) -> Sample:
    k = pick_hidden(rng, 256, 4096)
    out = k if rng.random() < 0.6 else pick_hidden(rng, 256, 4096)
    cfg = dict(in_features=k, hidden=pick_intermediate(rng, k), out_features=out,
               act=rng.choice(("exact", "tanh", "quick")), dtype=pick_dtype(rng))  # fmt: skip
    return Sample("gelu_mlp", "mlp", cfg, blocks.gelu_mlp(rows=_rows(rng), **cfg),
                  lambda e: e["T"] * e["I"] * (e["K"] + e["NO"]), cfg["dtype"])  # fmt: skip


def linear_epilogue(rng: Random) -> Sample:
    k = pick_hidden(rng)
    n = rng.choice((k, pick_hidden(rng), pick_intermediate(rng, k), 64 * rng.randint(1, 16)))
    cfg = dict(in_features=k, out_features=n, bias=rng.random() < 0.5,
               act=rng.choice(("none", "relu", "relu2", "silu", "exact", "tanh")), residual=rng.random() < 0.5,
               dtype=pick_dtype(rng))  # fmt: skip
    if cfg["residual"] and cfg["act"] == "none" and not cfg["bias"]:
        cfg["bias"] = True
    return Sample("linear_epilogue", "linear", cfg, composed.linear_epilogue(rows=_rows(rng), **cfg),
                  lambda e: e["T"] * e["K"] * e["N"], cfg["dtype"])  # fmt: skip


def fp8_gemm(rng: Random) -> Sample:
    cfg = dict(in_features=pick_hidden(rng, 512, 8192), out_features=pick_hidden(rng, 256, 8192),
               block=rng.choice((64, 128, 128)))  # fmt: skip
    draft = linear.fp8_blockscale_gemm(sizes=token_ladder(rng), **cfg)
    # The reference dequantises to float32 before its matmul.
    return Sample("fp8_gemm", "fp8_gemm", cfg, draft, lambda e: e["M"] * e["K"] * e["N"], "float32")


def softmax(rng: Random) -> Sample:
    cfg = dict(features=rng.choice((rng.randint(1000, 8000), rng.randint(30000, 60000), rng.randint(100000, 160000))),
               dtype=rng.choice(("float32", "float32", "bfloat16", "float16")))  # fmt: skip
    return Sample("softmax", "softmax", cfg, elementwise.softmax(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def topk_routing(rng: Random) -> Sample:
    if rng.random() < 0.4:
        groups = rng.choice((4, 8, 16))
        experts = groups * rng.choice((4, 8, 16, 32))
        top_groups = rng.randint(2, min(groups, 6))
        cfg = dict(experts=experts, top_k=rng.randint(2, min(8, top_groups * experts // groups)), groups=groups,
                   top_groups=top_groups, scale=rng.choice((1.0, 2.5, 1.5)))  # fmt: skip
        draft = moe.grouped_topk(rows=_rows(rng), **cfg)
    else:
        experts = rng.choice((8, 16, 32, 60, 64, 128, 160))
        cfg = dict(experts=experts, top_k=rng.choice((1, 2, 4, 6, 8)), renormalize=rng.random() < 0.5)
        draft = moe.softmax_topk(rows=_rows(rng), **cfg)
    return Sample("topk_routing", "routing", cfg, draft, _none, "float32")


def _moe_shape(rng: Random) -> dict[str, int]:
    experts = rng.choice((8, 16, 32, 60, 64, 128))
    return dict(hidden=pick_hidden(rng, 256, 7168), experts=experts, top_k=rng.choice((1, 2, 4, 6, 8)))


def moe_dispatch(rng: Random) -> Sample:
    cfg = dict(**_moe_shape(rng), dtype=pick_dtype(rng))
    return Sample("moe_dispatch", "moe_dispatch", cfg, composed.moe_dispatch(rows=_rows(rng), **cfg), _none,
                  cfg["dtype"], data_dependent=True)  # fmt: skip


def moe_combine(rng: Random) -> Sample:
    cfg = dict(**_moe_shape(rng), scatter=rng.random() < 0.5, dtype=pick_dtype(rng))
    return Sample("moe_combine", "moe_combine", cfg, composed.moe_combine(rows=_rows(rng), **cfg), _none,
                  cfg["dtype"], data_dependent=True)  # fmt: skip


def moe_layer(rng: Random) -> Sample:
    h = pick_hidden(rng, 256, 2048)
    experts = rng.choice((4, 8, 16, 32, 60))
    shared = pick_intermediate(rng, h) if rng.random() < 0.3 else 0
    cfg = dict(hidden=h, intermediate=64 * rng.randint(2, 24), experts=experts,
               top_k=rng.choice([k for k in (1, 2, 4, 6, 8) if k <= experts]), renormalize=rng.random() < 0.5,
               shared_intermediate=shared, dtype=pick_dtype(rng))  # fmt: skip
    draft = moe.moe_layer(rows=_rows(rng), **cfg)
    return Sample("moe_layer", "moe_layer", cfg, draft,
                  lambda e: e["T"] * e["H"] * (e["E"] + 3 * cfg["top_k"] * e["I"] + 3 * cfg["shared_intermediate"]),
                  cfg["dtype"], data_dependent=True)  # fmt: skip


def moe_expert_loop(rng: Random) -> Sample:
    experts = rng.choice((4, 8, 16, 32))
    cfg = dict(hidden=pick_hidden(rng, 256, 2048), intermediate=64 * rng.randint(2, 24), experts=experts,
               top_k=rng.choice([k for k in (1, 2, 4) if k <= experts]), renormalize=rng.random() < 0.5,
               act=rng.choice(("silu", "silu", "tanh")), dtype=pick_dtype(rng))  # fmt: skip
    return Sample("moe_expert_loop", "moe_layer", cfg, composed.moe_expert_loop(rows=_rows(rng), **cfg),
                  lambda e: e["T"] * 3 * cfg["top_k"] * e["H"] * e["I"], cfg["dtype"], data_dependent=True)


def swiglu_bwd(rng: Random) -> Sample:
    cfg = dict(intermediate=pick_intermediate(rng, pick_hidden(rng, 256, 4096)), dtype=pick_dtype(rng))
    return Sample("swiglu_bwd", "swiglu_bwd", cfg, elementwise.swiglu_bwd(rows=_rows(rng), **cfg), _none,
                  cfg["dtype"])  # fmt: skip


def gated_act(rng: Random) -> Sample:
    cfg = dict(intermediate=pick_intermediate(rng, pick_hidden(rng, 256, 4096)),
               act=rng.choice(("silu", "tanh", "exact")), dtype=pick_dtype(rng))  # fmt: skip
    return Sample("gated_act", "gated_act", cfg, elementwise.gated_fwd(rows=_rows(rng), **cfg), _none, cfg["dtype"])


def activation(rng: Random) -> Sample:
    cfg = dict(features=pick_intermediate(rng, pick_hidden(rng)), act=rng.choice(("exact", "tanh", "quick")),
               dtype=pick_dtype(rng))  # fmt: skip
    return Sample("activation", "activation", cfg, elementwise.activation(rows=_rows(rng), **cfg), _none,
                  cfg["dtype"])  # fmt: skip


def embedding(rng: Random) -> Sample:
    cfg = dict(vocab=rng.choice((rng.randint(1000, 9000), rng.randint(30000, 70000))),
               hidden=pick_hidden(rng, 256, 4096), dtype=pick_dtype(rng))  # fmt: skip
    return Sample("embedding", "embedding", cfg, linear.embedding(rows=_rows(rng), **cfg), _none, cfg["dtype"])


FAMILIES: dict[str, Callable[[Random], Sample]] = {
    f.__name__: f
    for f in (
        rmsnorm, rmsnorm_bwd, layernorm, add_norm, rope, decode_attention, prefill_attention, attention_block,
        decoder_layer, gated_mlp, gelu_mlp, linear_epilogue, fp8_gemm, softmax, topk_routing, moe_dispatch,
        moe_combine, moe_layer, moe_expert_loop, swiglu_bwd, gated_act, activation, embedding,
    )
}  # fmt: skip
