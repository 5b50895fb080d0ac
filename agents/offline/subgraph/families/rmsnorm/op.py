"""RMSNorm ops: y = norm(h) [* weight | * (offset + weight)], with h = x, or h = x + residual (both returned).

``cast_before_weight``: the normalised value is rounded to h's dtype before the weight multiplies it (Llama,
Qwen: ``weight * normed.to(x.dtype)``); else the weight multiplies in float32 (Gemma's ``1 + weight``).
"""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define


def rms(h: torch.Tensor, weight: Optional[torch.Tensor], eps: float, offset: float, cast_before_weight: bool,
        out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    hf = h.float()
    n = hf * torch.rsqrt((hf * hf).mean(dim=-1, keepdim=True) + eps)
    if weight is None:
        return n.to(out_dtype)
    if cast_before_weight:
        w = weight + offset if offset else weight
        return (n.to(h.dtype) * w).to(out_dtype)
    return (n * (weight.float() + offset)).to(out_dtype)


def _rmsnorm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, offset: float, cast_before_weight: bool,
             out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    return rms(x, weight, eps, offset, cast_before_weight, out_dtype)


def _rmsnorm_fake(x, weight, eps, offset, cast_before_weight, out_dtype):
    return torch.empty(x.shape, dtype=out_dtype, device=x.device)


def _rmsnorm_cuda(x, weight, eps, offset, cast_before_weight, out_dtype, out=None):
    from .kernel import rmsnorm

    return rmsnorm(x, None, weight, eps, offset, cast_before_weight, out_dtype, out)[0]


def _add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor], eps: float, offset: float,
                 cast_before_weight: bool, out_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    h = x + residual
    return rms(h, weight, eps, offset, cast_before_weight, out_dtype), h


def _add_rmsnorm_fake(x, residual, weight, eps, offset, cast_before_weight, out_dtype):
    return torch.empty(x.shape, dtype=out_dtype, device=x.device), torch.empty_like(x)


def _add_rmsnorm_cuda(x, residual, weight, eps, offset, cast_before_weight, out_dtype, out=None):
    from .kernel import rmsnorm

    return rmsnorm(x, residual, weight, eps, offset, cast_before_weight, out_dtype, out)


RMSNORM = define("rmsnorm", _rmsnorm, _rmsnorm_fake, _rmsnorm_cuda)
ADD_RMSNORM = define("add_rmsnorm", _add_rmsnorm, _add_rmsnorm_fake, _add_rmsnorm_cuda)
