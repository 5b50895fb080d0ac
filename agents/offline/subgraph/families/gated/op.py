"""Gated activation: y = (act(a) * b), computed in float32, rounded once to ``out_dtype``.

``act_dtype``: the activation is rounded to this dtype before the multiply (a reference that casts
``act(a).to(x.dtype)`` first), or not rounded (None). ``act``: silu, gelu (erf), gelu_tanh, quick_gelu
(x * sigmoid(1.702 x)), relu. The matcher reads which from the graph's ops (erf and tanh gelu agree too closely
at half precision for the region check to tell them apart); the region check confirms it.
"""

from __future__ import annotations

import torch

from typing import Optional

from ...ops import define

ACTIVATIONS = ("silu", "gelu_tanh", "gelu", "quick_gelu", "relu")


def activate(x: torch.Tensor, act: str) -> torch.Tensor:
    if act == "silu":
        return torch.nn.functional.silu(x)
    if act == "gelu":
        return torch.nn.functional.gelu(x)
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(x, approximate="tanh")
    if act == "quick_gelu":
        return x * torch.sigmoid(1.702 * x)
    if act == "relu":
        return torch.relu(x)
    raise ValueError(f"unknown activation {act!r}")


def _gated(a: torch.Tensor, b: torch.Tensor, act: str, act_dtype: Optional[torch.dtype],
           out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    g = activate(a.float(), act)
    if act_dtype is not None:
        g = g.to(act_dtype).float()
    return (g * b.float()).to(out_dtype)


def _gated_fake(a, b, act, act_dtype, out_dtype):
    return torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=out_dtype, device=a.device)


def _gated_cuda(a, b, act, act_dtype, out_dtype, out=None):
    from .kernel import gated

    return gated(a, b, act, act_dtype, out_dtype, out)


GATED = define("gated", _gated, _gated_fake, _gated_cuda)
