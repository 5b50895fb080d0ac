"""Attention through ``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention / memory-efficient
kernels on the GPU, the math kernel on the CPU), with grouped K/V heads passed as they are (``enable_gqa``).

``mask_mode``: 0 none; 1 added to the scores (float mask); 2 ``masked_fill(cond, -inf)`` (True: masked);
3 ``where(cond, scores, -inf)`` (True: kept).

On CUDA the backend is the fastest that agrees with SDPA's default, measured on each shape's first call
(``backend.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .backend import DEFAULT, FUSED, cuda_time_ms, fastest, run_with

_CHOSEN: dict = {}  # per call shape: the backend its first call measured fastest


def attend(q, k, v, mask, scale, causal, mask_mode, out_dtype):
    attn_mask = None
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
        return F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask, is_causal=causal, scale=scale,
                                              enable_gqa=gqa)  # fmt: skip

    backend = DEFAULT
    if q.is_cuda:
        key = (q4.shape, k4.shape, v4.shape, q4.stride(), k4.stride(), v4.stride(), q4.dtype, q4.device, causal, scale, mask_mode,
               None if attn_mask is None else (attn_mask.shape, attn_mask.dtype))  # fmt: skip
        backend = _CHOSEN.get(key, DEFAULT)
        if key not in _CHOSEN and not torch.cuda.is_current_stream_capturing():
            tries = {name: (lambda name=name: run_with(name, sdpa)) for name in (DEFAULT, *FUSED)}
            backend = fastest(key, tries, cuda_time_ms, _CHOSEN)
    o = run_with(backend, sdpa)
    return o.reshape(*q.shape[:-1], v.shape[-1]).to(out_dtype)
