"""Small-M linear layers (decode-shaped GEMMs: y = a @ w.T + bias with at most 16 rows of a), as GEMV."""

from ..base import Family
from .match import find

FAMILY = Family("gemv", find)
