"""Gated activations: act(a) * b, with silu, gelu (erf or tanh), quick_gelu or relu."""

from ..base import Family
from .match import find

FAMILY = Family("gated", find)
