"""Ops whose fake-tensor rules refuse calls their real kernels take, stood in by custom ops during capture.

``torch._grouped_mm`` (a MoE layer's grouped GEMMs) runs in float16 and float32 on CUDA and the CPU through a
fallback, but its meta rule accepts bfloat16 only, so a reference calling it in another dtype neither traces
nor compiles (Inductor propagates shapes with the same rule). During capture such a call becomes
``sf_subgraph.grouped_mm``: the same computation (it calls ``torch._grouped_mm``), with a shape rule of its own;
the rest of the reference then traces, the families are found in it, and Inductor compiles around the call. On
CUDA the call runs the fastest of torch's fallback and a grouped GEMM with no host sync (``grouped_mm_kernel.py``),
so the whole layer can be one CUDA graph. Every other call keeps its aten op (``NotImplemented``: tracing goes on
with the original).

Shipped inside subgraph candidates: torch only (triton for the CUDA kernel, imported on first CUDA call).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .ops import define


def _grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch._grouped_mm(mat_a, mat_b, offs=offs)


def _grouped_mm_fake(mat_a, mat_b, offs):
    return mat_a.new_empty((mat_a.shape[0], mat_b.shape[-1]))


def _grouped_mm_cuda(mat_a, mat_b, offs):
    from .grouped_mm_kernel import fastest_grouped_mm

    return fastest_grouped_mm(mat_a, mat_b, offs, lambda: _grouped_mm(mat_a, mat_b, offs))


GROUPED_MM = define("grouped_mm", _grouped_mm, _grouped_mm_fake, _grouped_mm_cuda)


def _grouped_mm_stand_in(mat_a: Any, mat_b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    """The 2-D by 3-D form with offsets (token rows sorted by expert against stacked expert weights) outside
    bfloat16, whose own rule traces."""
    plain = bias is None and out_dtype in (None, mat_a.dtype) and offs is not None
    if mat_a.dtype == torch.bfloat16 or not plain or mat_a.dim() != 2 or mat_b.dim() != 3:
        return NotImplemented
    return GROUPED_MM(mat_a, mat_b, offs)


STAND_INS: dict[Any, Callable[..., Any]] = {torch.ops.aten._grouped_mm.default: _grouped_mm_stand_in}
