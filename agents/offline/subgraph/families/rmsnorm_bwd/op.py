"""RMSNorm backward over the last dim, for ``y = x * rstd * (weight + offset)``, ``rstd = rsqrt(mean(x^2) + eps)``:

    xhat = x * rstd,  gw = grad * (weight + offset)
    dx = rstd * (gw - xhat * mean(gw * xhat))      (over the last dim)
    dw = sum over every row of grad * xhat

all in float32 from the inputs widened, rounded once to ``dx_dtype`` / ``dw_dtype``. Without a weight, ``gw`` is
the gradient itself. ``rmsnorm_bwd`` returns (dx, dw); ``rmsnorm_bwd_dx`` dx alone (a frozen or absent weight).
"""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define


def backward(x: torch.Tensor, weight: Optional[torch.Tensor], grad: torch.Tensor, eps: float,
             offset: float) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(dx, dw) in float32."""
    xf, g = x.float(), grad.float()
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    xhat = xf * rstd
    gw = g * (weight.float() + offset) if weight is not None else g
    dx = rstd * (gw - xhat * (gw * xhat).mean(dim=-1, keepdim=True))
    return dx, (g * xhat).reshape(-1, x.shape[-1]).sum(dim=0)


def _rmsnorm_bwd(x: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, eps: float, offset: float,
                 dx_dtype: torch.dtype, dw_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    dx, dw = backward(x, weight, grad, eps, offset)
    return dx.to(dx_dtype), dw.to(dw_dtype)


def _rmsnorm_bwd_fake(x, weight, grad, eps, offset, dx_dtype, dw_dtype):
    return (torch.empty(x.shape, dtype=dx_dtype, device=x.device),
            torch.empty(x.shape[-1:], dtype=dw_dtype, device=x.device))  # fmt: skip


def _rmsnorm_bwd_cuda(x, weight, grad, eps, offset, dx_dtype, dw_dtype, out=None):
    from .kernel import fastest_rmsnorm_bwd

    return fastest_rmsnorm_bwd(x, weight, grad, eps, offset, dx_dtype, dw_dtype,
                               lambda: _rmsnorm_bwd(x, weight, grad, eps, offset, dx_dtype, dw_dtype), out)


def _rmsnorm_bwd_dx(x: torch.Tensor, weight: Optional[torch.Tensor], grad: torch.Tensor, eps: float, offset: float,
                    dx_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    return backward(x, weight, grad, eps, offset)[0].to(dx_dtype)


def _rmsnorm_bwd_dx_fake(x, weight, grad, eps, offset, dx_dtype):
    return torch.empty(x.shape, dtype=dx_dtype, device=x.device)


def _rmsnorm_bwd_dx_cuda(x, weight, grad, eps, offset, dx_dtype, out=None):
    from .kernel import fastest_rmsnorm_bwd

    return fastest_rmsnorm_bwd(x, weight, grad, eps, offset, dx_dtype, None,
                               lambda: _rmsnorm_bwd_dx(x, weight, grad, eps, offset, dx_dtype), out)


RMSNORM_BWD = define("rmsnorm_bwd", _rmsnorm_bwd, _rmsnorm_bwd_fake, _rmsnorm_bwd_cuda)
RMSNORM_BWD_DX = define("rmsnorm_bwd_dx", _rmsnorm_bwd_dx, _rmsnorm_bwd_dx_fake, _rmsnorm_bwd_dx_cuda)
