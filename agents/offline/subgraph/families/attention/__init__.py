"""Attention written out (softmax of scaled q k^T, masked or causal, times v; GQA by repetition) -> SDPA."""

from ..base import Family
from .match import find

FAMILY = Family("attention", find)
