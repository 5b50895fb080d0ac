"""Attention through ``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention / memory-efficient /
cuDNN kernels on the GPU, the math kernel on the CPU), with grouped K/V heads passed as they are
(``enable_gqa``); soft-capped logits through the same math spelled out (SDPA has no soft cap).

``mask_mode``: 0 none; 1 added to the scores (float mask); 2 ``masked_fill(cond, -inf)`` (True: masked);
3 ``where(cond, scores, -inf)`` (True: kept). ``query_squeezed``: the mask was applied to scores whose unit
query dim the reference had squeezed away (decode), so it gains that dim back before it broadcasts.

On CUDA the way each call shape runs is the fastest that agrees with the default (SDPA's own choice, or the
spelled-out math under a soft cap), measured on the shape's first call (``backend.py``): SDPA's fused
backends and, at one query per sequence with no float mask, split-KV decoding in Triton (``decode.py``).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from ..measure import DEFAULT, chosen_way
from .backend import FUSED, run_with

_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest
_DECODE_BLOCKS = (32, 64, 128)  # keys per step of the decode kernel, each a contender


def _math(q4, k4, v4, attn_mask, causal, scale, softcap):
    """Attention spelled out with the soft cap: fp32 scores and softmax, probabilities rounded to V's dtype."""
    group = q4.shape[-3] // k4.shape[-3]
    k4, v4 = (t.repeat_interleave(group, dim=-3) if group > 1 else t for t in (k4, v4))
    s = (q4.float() @ k4.float().transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if attn_mask is not None:
        s = s + attn_mask.float() if attn_mask.dtype != torch.bool else s.masked_fill(~attn_mask, float("-inf"))
    return torch.softmax(s, dim=-1).to(v4.dtype) @ v4


def attend(q, k, v, mask, scale, causal, mask_mode, out_dtype, softcap=0.0, query_squeezed=False):
    attn_mask = None
    if mask is not None and query_squeezed:
        mask = mask.unsqueeze(-2)
    if mask is not None and mask_mode == 1:
        attn_mask = mask.to(q.dtype)
    elif mask is not None and mask_mode == 2:
        attn_mask = ~mask.bool()
    elif mask is not None and mask_mode == 3:
        attn_mask = mask.bool()
    gqa = k.dim() >= 3 and k.shape[-3] != q.shape[-3]
    # The fused kernels (FlashAttention, memory-efficient, cuDNN) take (batch, heads, seq, dim) only: a call with
    # the heads leading and no batch, as references spell one sequence, would get the math kernel, which writes
    # the whole score matrix (56 ms against 1.5 ms on an H100 at 16k tokens). The mask broadcasts from the right.
    lead = max(0, 4 - q.dim())
    q4, k4, v4 = (t.reshape((1,) * lead + tuple(t.shape)) for t in (q, k.to(q.dtype), v.to(q.dtype)))

    def sdpa():
        if softcap:
            return _math(q4, k4, v4, attn_mask, causal, scale, softcap)
        return F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)  # fmt: skip

    ways: dict[str, Callable[[], torch.Tensor]] = {DEFAULT: sdpa}
    if q.is_cuda:
        if not softcap:
            ways.update({name: (lambda name=name: run_with(name, sdpa)) for name in FUSED})
        ways.update(_decode_ways(q4, k4, v4, attn_mask, causal, scale, softcap))
    way = DEFAULT
    if len(ways) > 1:
        key = (q4.shape, k4.shape, v4.shape, q4.stride(), k4.stride(), v4.stride(), q4.dtype, q4.device, causal, scale,
               mask_mode, softcap, None if attn_mask is None else (attn_mask.shape, attn_mask.dtype))  # fmt: skip
        way = chosen_way(key, ways, _CHOSEN, op="attention")
    o = run_with(way, sdpa) if way in (DEFAULT, *FUSED) else ways[way]()
    return o.reshape(*q.shape[:-1], v.shape[-1]).to(out_dtype)


def _decode_ways(q4, k4, v4, attn_mask, causal, scale, softcap) -> dict[str, Callable[[], torch.Tensor]]:
    """The Triton decode kernel at each block size, where it serves the call (one query, a boolean mask or none)."""
    from .decode import decode_attention, takes

    if causal or (attn_mask is not None and attn_mask.dtype != torch.bool) or not takes(q4, k4, v4, attn_mask):
        return {}
    return {
        f"triton_decode_{n}": (lambda n=n: decode_attention(q4, k4, v4, attn_mask, scale, softcap, q4.dtype, n))
        for n in _DECODE_BLOCKS
    }
