"""Scaled-dot-product attention: a probed matcher (``attention_match.py``), a CUDA C++ decode kernel
(``attention_cuda.py``), a Triton flash-attention kernel (``attention_triton.py``), a PyTorch SDPA fallback (here).

Matching: the op signature only pre-filters (softmax with batched matmuls, or an SDPA op). The semantics
the kernel needs (layout, softmax scale, causal flag and diagonal, which KV head serves which query head)
are then *probed*: the reference runs on the CPU on its smallest workload(s), and every candidate
semantics, computed in fp32 with plain torch, is compared with it. Only candidates that reproduce the
reference are bound, so a binding is never a guess.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .attention_cuda import CUDA_DECODE_MAX_SPLITS, CUDA_DECODE_TILE, cuda_decode_accepts, render_attention_cuda
from .attention_match import LAYOUT_HELPERS, LAYOUTS, attention_candidates, dedupe, out_name, probed_semantics, semantics
from .attention_triton import render_attention_triton, triton_accepts
from .base import CUDA_FILE, Binding, Family, Renderer, py_signature
from .probe import Probe

__all__ = ["ATTENTION", "CUDA_DECODE_MAX_SPLITS", "CUDA_DECODE_TILE", "cuda_decode_accepts", "match_attention",
           "semantics"]


def match_attention(problem: Problem, sig: OpSignature, probe: Probe | None = None) -> list[Binding]:
    return ATTENTION.match(problem, sig, probe)


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
{LAYOUT_HELPERS}

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


ATTENTION = Family(
    "attention", attention_candidates,
    semantics=probed_semantics,
    prune=dedupe,
    renderers=(
        Renderer(
            # the splits of a (batch, kv head) merged in a cluster first, then through L2 by the last to arrive
            "cuda_cpp", True, ({"threads": (128, 256), "waves": (2, 1), "cluster": (True,)},
                               {"threads": (128, 256), "waves": (1, 2)}),
            render_attention_cuda, file=CUDA_FILE, accepts=cuda_decode_accepts,
        ),  # fmt: skip
        Renderer(
            "triton", True,
            {"block_m": (128, 64), "block_n": (64, 128, 32), "num_warps": (8, 4), "num_stages": (3, 2),
             "split": ("auto", "off")},
            render_attention_triton, accepts=triton_accepts,
        ),  # fmt: skip
        Renderer("pytorch", False, {}, render_attention_pytorch),
    ),
)

