"""Which of SDPA's fused backends runs an attention shape: chosen by measurement on the shape's first call.

SDPA's own order (FlashAttention, then memory-efficient, then cuDNN, then math) is fixed, but the fastest differs
by GPU, head dim, sequence length and GQA ratio, so each is a contender of ``measure.fastest`` on the shape's
first call, beside SDPA's default.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..measure import DEFAULT

FUSED = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def run_with(backend: str, call: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``call`` with SDPA limited to ``backend`` (or left to its default)."""
    if backend == DEFAULT:
        return call()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, backend)]):
        return call()
