"""RoPE ops: the first ``rot_dim`` of x's last dim rotated, the rest passed through, computed in float32 and
rounded once to ``out_dtype``.

``rope(x, cos, sin)``: y = x * cos + rotate(x) * sin, with rotate(x) = cat(-x2, x1) over the two halves
(``rotate_half``) or, ``interleaved``, (-x[2i+1], x[2i]) over each pair; cos and sin hold one value per
rotated column, or with ``pair_cos`` one per pair (the same for both of its columns: ``x1 * cos - x2 * sin``
spelled out), and broadcast over x's leading dims. ``rope_complex(x, freqs)``: the pairs (2i, 2i+1) of x as
complex numbers times ``freqs`` (one complex value per pair: ``view_as_complex`` spelling).
"""

from __future__ import annotations

import torch

from ...ops import define


def rotate(x: torch.Tensor, interleaved: bool) -> torch.Tensor:
    if interleaved:
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def per_column(t: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """One value per pair -> one per column."""
    if t.shape[-1] == 1:
        return t
    return t.repeat_interleave(2, dim=-1) if interleaved else torch.cat((t, t), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rot_dim: int, interleaved: bool, pair_cos: bool,
          out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    xf = x.float()
    xr = xf[..., :rot_dim]
    if pair_cos:
        cos, sin = per_column(cos, interleaved), per_column(sin, interleaved)
    y = xr * cos.float() + rotate(xr, interleaved) * sin.float()
    return torch.cat((y.expand_as(xr), xf[..., rot_dim:]), dim=-1).to(out_dtype)


def _rope_fake(x, cos, sin, rot_dim, interleaved, pair_cos, out_dtype):
    return torch.empty(x.shape, dtype=out_dtype, device=x.device)


def _rope_cuda(x, cos, sin, rot_dim, interleaved, pair_cos, out_dtype, out=None):
    from .kernel import rope

    return rope(x, cos, sin, rot_dim, interleaved, pair_cos, out_dtype, out)


def _rope_complex(x: torch.Tensor, freqs: torch.Tensor, rot_dim: int, out_dtype: torch.dtype) -> torch.Tensor:
    xf = x.float()
    pairs = torch.view_as_complex(xf[..., :rot_dim].reshape(*x.shape[:-1], -1, 2).contiguous())
    y = torch.view_as_real(pairs * freqs).flatten(-2)
    return torch.cat((y.to(xf.dtype), xf[..., rot_dim:]), dim=-1).to(out_dtype)


def _rope_complex_fake(x, freqs, rot_dim, out_dtype):
    return torch.empty(x.shape, dtype=out_dtype, device=x.device)


def _rope_complex_cuda(x, freqs, rot_dim, out_dtype, out=None):
    from .kernel import rope

    parts = torch.view_as_real(freqs)
    return rope(x, parts[..., 0], parts[..., 1], rot_dim, True, True, out_dtype, out)


ROPE = define("rope", _rope, _rope_fake, _rope_cuda)
ROPE_COMPLEX = define("rope_complex", _rope_complex, _rope_complex_fake, _rope_complex_cuda)
