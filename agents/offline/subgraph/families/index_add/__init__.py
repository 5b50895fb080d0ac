"""Rows added into a tensor by index (``index_add``, ``scatter_add`` along rows, ``index_put`` accumulating): a
MoE layer's combine and the scatter that ends its expert loops, without atomics."""

from ..base import Family
from .match import find

FAMILY = Family("index_add", find)
