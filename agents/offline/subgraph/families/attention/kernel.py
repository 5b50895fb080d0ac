"""Attention through ``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention / memory-efficient
kernels on the GPU, the math kernel on the CPU), with grouped K/V heads passed as they are (``enable_gqa``).

``mask_mode``: 0 none; 1 added to the scores (float mask); 2 ``masked_fill(cond, -inf)`` (True: masked);
3 ``where(cond, scores, -inf)`` (True: kept).
"""

from __future__ import annotations

import torch.nn.functional as F


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
    o = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask, is_causal=causal, scale=scale, enable_gqa=gqa)
    return o.reshape(*q.shape[:-1], v.shape[-1]).to(out_dtype)
