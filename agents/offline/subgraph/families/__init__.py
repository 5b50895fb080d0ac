"""The families, in the order ``rewrite`` tries them (a family listed first wins nodes two could claim).

Adding a family: copy a folder (``op.py``: the custom op and its plain-torch semantics; ``kernel.py``: the
kernel; ``match.py``: its sites) and list its ``FAMILY`` here.
"""

from __future__ import annotations

from .base import Family
from .attention import FAMILY as ATTENTION
from .gated import FAMILY as GATED
from .gemv import FAMILY as GEMV
from .grouped_routing import FAMILY as GROUPED_ROUTING
from .index_add import FAMILY as INDEX_ADD
from .rmsnorm import FAMILY as RMSNORM
from .rmsnorm_bwd import FAMILY as RMSNORM_BWD
from .rope import FAMILY as ROPE
from .routing import FAMILY as ROUTING
from .scaled_mm import FAMILY as SCALED_MM

FAMILIES: tuple[Family, ...] = (RMSNORM_BWD, RMSNORM, ROPE, ATTENTION, GATED, ROUTING, GROUPED_ROUTING, SCALED_MM, GEMV,
                                INDEX_ADD)

__all__ = ["FAMILIES", "Family"]
