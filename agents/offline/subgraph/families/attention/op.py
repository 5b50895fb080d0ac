"""Attention op: softmax(q k^T * scale [+ mask | causal]) v, K/V heads may be fewer than Q heads (GQA/MQA)."""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define
from .kernel import attend


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor], scale: float,
               causal: bool, mask_mode: int, out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    return attend(q, k, v, mask, scale, causal, mask_mode, out_dtype)


def _attention_fake(q, k, v, mask, scale, causal, mask_mode, out_dtype):
    return torch.empty((*q.shape[:-1], v.shape[-1]), dtype=out_dtype, device=q.device)


ATTENTION = define("attention", _attention, _attention_fake)
