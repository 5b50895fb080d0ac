"""The template library: op families, each with a matcher and renderers per language.

Adding a family: write a module with a ``Family`` and list it in ``FAMILIES``.
"""

from __future__ import annotations

from . import attention, elementwise, matmul, rmsnorm, rowwise
from .base import Binding, Family, Renderer, build_solution

FAMILIES: tuple[Family, ...] = (
    rmsnorm.FAMILY,
    rowwise.LAYERNORM,
    rowwise.SOFTMAX,
    elementwise.FAMILY,
    matmul.GEMM,
    attention.ATTENTION,
)

__all__ = ["FAMILIES", "Binding", "Family", "Renderer", "build_solution"]
