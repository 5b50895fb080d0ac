"""Small-M linear: y = a @ w.T (+ bias), a ``[M, K]`` with M <= ``MAX_M``, w ``[N, K]``, bias ``[N]`` or absent.

The plain-torch semantics are ``torch.nn.functional.linear``: what the reference's ``mm``/``addmm`` compute.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define

MAX_M = 16  # rows of a: past this a GEMM's tiles reuse the weight, and cuBLAS's tensor-core tiles win
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _linear(a: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.linear(a, w, bias)


def _linear_fake(a, w, bias):
    return torch.empty((a.shape[0], w.shape[0]), dtype=a.dtype, device=a.device)


def _linear_cuda(a, w, bias):
    from .kernel import small_m_linear

    return small_m_linear(a, w, bias)


SMALL_M_LINEAR = define("small_m_linear", _linear, _linear_fake, _linear_cuda)
