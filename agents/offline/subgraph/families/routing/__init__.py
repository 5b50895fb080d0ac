"""Router top-k: softmax over the experts' logits, the k largest with their indices, optionally renormalised."""

from ..base import Family
from .match import find

FAMILY = Family("routing", find)
