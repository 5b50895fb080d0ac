"""RMSNorm, with the residual add before it and the weight (or ``1 + weight``) after it, both optional."""

from ..base import Family
from .match import find

FAMILY = Family("rmsnorm", find)
