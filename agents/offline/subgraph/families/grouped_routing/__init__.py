"""Group-limited router top-k (DeepSeek-V3's): expert scores, a correction bias steering the choice, the best groups
by the sum of their best experts, then the k best experts inside those groups."""

from ..base import Family
from .match import find

FAMILY = Family("grouped_routing", find)
