"""Rotary position embedding on q or k: half-split or interleaved pairs, partial rotary, complex frequencies."""

from ..base import Family
from .match import find

FAMILY = Family("rope", find)
