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
    o = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), attn_mask=attn_mask, is_causal=causal,
                                       scale=scale, enable_gqa=gqa)  # fmt: skip
    return o.to(out_dtype)
