"""Block-scaled GEMM: y = (a * A) @ (b * B).T in float32, rounded to ``out_dtype``, where a ``[M, K]`` and b
``[N, K]`` hold low-precision values (fp8) and A, B broadcast one scale per tile: ``a_scale[i // ra, k // ca]``
for a's element (i, k) with ``a_block = (ra, ca)``, and likewise ``b_scale`` with ``b_block`` (the DeepSeek-V3
recipe is a_block (1, 128), b_block (128, 128)).

The plain-torch semantics spell the dequantization out, as references do; the kernel multiplies the fp8 tiles
on tensor cores and applies the scales per K block in float32.
"""

from __future__ import annotations

import torch

from ...ops import define

LOW = (torch.float8_e4m3fn, torch.float8_e5m2)


def expand_scale(scale: torch.Tensor, rows: int, cols: int, block: list[int]) -> torch.Tensor:
    """One scale per ``block`` tile, broadcast to every element of a ``[rows, cols]`` tensor."""
    s = scale.float().repeat_interleave(block[0], dim=0)[:rows]
    return s.repeat_interleave(block[1], dim=1)[:, :cols]


def _scaled_mm(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor, a_block: list[int],
               b_block: list[int], out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    a_deq = a.float() * expand_scale(a_scale, a.shape[0], a.shape[1], a_block)
    b_deq = b.float() * expand_scale(b_scale, b.shape[0], b.shape[1], b_block)
    return (a_deq @ b_deq.t()).to(out_dtype)


def _scaled_mm_fake(a, a_scale, b, b_scale, a_block, b_block, out_dtype):
    return torch.empty((a.shape[0], b.shape[0]), dtype=out_dtype, device=a.device)


def _scaled_mm_cuda(a, a_scale, b, b_scale, a_block, b_block, out_dtype):
    from .kernel import block_scaled_mm

    def reference():
        return _scaled_mm(a, a_scale, b, b_scale, a_block, b_block, out_dtype)

    return block_scaled_mm(a, a_scale, b, b_scale, a_block, b_block, out_dtype, reference)


SCALED_MM = define("block_scaled_mm", _scaled_mm, _scaled_mm_fake, _scaled_mm_cuda)
