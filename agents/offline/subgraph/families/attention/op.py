"""Attention op: softmax(cap(q k^T * scale) [+ mask | causal]) v, with cap(s) = softcap * tanh(s / softcap) when
``softcap`` is set; K/V heads may be fewer than Q heads (GQA/MQA)."""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define
from .kernel import attend


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor], scale: float,
               causal: bool, mask_mode: int, out_dtype: torch.dtype, softcap: float = 0.0,
               query_squeezed: bool = False) -> torch.Tensor:  # fmt: skip
    return attend(q, k, v, mask, scale, causal, mask_mode, out_dtype, softcap, query_squeezed)


def _attention_fake(q, k, v, mask, scale, causal, mask_mode, out_dtype, softcap=0.0, query_squeezed=False):
    return torch.empty((*q.shape[:-1], v.shape[-1]), dtype=out_dtype, device=q.device)


ATTENTION = define("attention", _attention, _attention_fake)
