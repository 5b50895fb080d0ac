"""RMSNorm backward: the input's gradient (and the weight's) from x, the weight and the output's gradient, in one
pass over the rows."""

from ..base import Family
from .match import find

FAMILY = Family("rmsnorm_bwd", find)
