"""Router top-k: the ``k`` largest of ``softmax(x.float())`` over the last dim, largest first, and their indices
(int64); with ``renormalize`` the k weights are divided by their sum.

Float32 probabilities only (the matcher's rule): rounded to half precision, probabilities tie often, and which
of two tied experts ``torch.topk`` puts first is not specified; in float32 a tie needs equal logits.
"""

from __future__ import annotations

import torch

from ...ops import define


def _softmax_topk(x: torch.Tensor, k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    weights, ids = torch.topk(torch.softmax(x.float(), dim=-1), k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def _softmax_topk_fake(x, k, renormalize):
    shape = (*x.shape[:-1], k)
    return torch.empty(shape, dtype=torch.float32, device=x.device), torch.empty(shape, dtype=torch.int64,
                                                                                 device=x.device)  # fmt: skip


def _softmax_topk_cuda(x, k, renormalize):
    from .kernel import fastest_softmax_topk

    return fastest_softmax_topk(x, k, renormalize, lambda: _softmax_topk(x, k, renormalize))


SOFTMAX_TOPK = define("softmax_topk", _softmax_topk, _softmax_topk_fake, _softmax_topk_cuda)
