"""Block-scaled low-precision GEMM: a reference that dequantizes fp8 operands by per-tile scales, then multiplies."""

from ..base import Family
from .match import find

FAMILY = Family("scaled_mm", find)
