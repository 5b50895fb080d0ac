"""The row-wise families besides RMSNorm (``rmsnorm.py``): softmax and LayerNorm over the last dim."""

from __future__ import annotations

from .layernorm import LAYERNORM, match_layernorm, render_layernorm_cuda
from .softmax import (SOFTMAX, SOFTMAX_TRITON_BLOCK, SOFTMAX_TRITON_LOOP_BLOCK, match_softmax, render_softmax_cuda,
                      render_softmax_triton)

__all__ = ["LAYERNORM", "SOFTMAX", "SOFTMAX_TRITON_BLOCK", "SOFTMAX_TRITON_LOOP_BLOCK", "match_layernorm",
           "match_softmax", "render_layernorm_cuda", "render_softmax_cuda", "render_softmax_triton"]
