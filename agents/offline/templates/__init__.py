"""The template library: op families, each with a matcher and renderers per language.

Adding a family: write a module with a ``Family`` (candidate bindings from the op list, renderers, and
optionally a plain-torch model of its semantics) and list it in ``FAMILIES``; ``Family.match`` keeps only
the candidates that reproduce the reference on the CPU (``probe.py``).
"""

from __future__ import annotations

from . import attention, elementwise, layernorm, matmul, mha, mlp, rmsnorm, rope, softmax
from .base import Binding, Family, Renderer, build_solution

FAMILIES: tuple[Family, ...] = (
    rmsnorm.FAMILY,
    layernorm.LAYERNORM,
    softmax.SOFTMAX,
    elementwise.FAMILY,
    matmul.GEMM,
    mlp.FAMILY,
    mha.FAMILY,
    attention.ATTENTION,
    rope.ROPE,
)

__all__ = ["FAMILIES", "Binding", "Family", "Renderer", "build_solution"]
