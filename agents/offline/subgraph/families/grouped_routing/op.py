"""Group-limited top-k over the last dim of ``logits`` (E experts in ``groups`` equal groups):

    scores = sigmoid(logits.float())  (or softmax over the experts)
    choice = scores + bias.float()    (no bias: the scores)
    group score = the sum of the ``group_k`` largest choices in the group
    the ``top_groups`` best groups kept; every other expert's choice becomes ``fill``
    ids = the k largest choices, largest first (int64); weights = scores at ids (float32)

The weights are the unbiased scores, as the reference gathers them; renormalising and scaling them is left to the
rest of the graph.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define

SCORES = ("sigmoid", "softmax")


def _grouped_topk(logits: torch.Tensor, bias: Optional[torch.Tensor], k: int, groups: int, top_groups: int,
                  group_k: int, score: str, fill: float) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    x = logits.float()
    scores = torch.sigmoid(x) if score == "sigmoid" else torch.softmax(x, dim=-1)
    choice = scores + bias.float() if bias is not None else scores
    lead, e = choice.shape[:-1], choice.shape[-1]
    grouped = choice.reshape(-1, groups, e // groups)
    group_scores = grouped.topk(group_k, dim=-1).values.sum(dim=-1)
    best = group_scores.topk(top_groups, dim=-1).indices
    keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
    masked = choice.reshape(-1, e).masked_fill(~keep.repeat_interleave(e // groups, dim=1), fill)
    ids = masked.topk(k, dim=-1).indices
    return scores.reshape(-1, e).gather(1, ids).reshape(*lead, k), ids.reshape(*lead, k)


def _grouped_topk_fake(logits, bias, k, groups, top_groups, group_k, score, fill):
    shape = (*logits.shape[:-1], k)
    return (torch.empty(shape, dtype=torch.float32, device=logits.device),
            torch.empty(shape, dtype=torch.int64, device=logits.device))  # fmt: skip


def _grouped_topk_cuda(logits, bias, k, groups, top_groups, group_k, score, fill):
    from .kernel import fastest_grouped_topk

    args = (logits, bias, k, groups, top_groups, group_k, score, fill)
    return fastest_grouped_topk(*args, default=lambda: _grouped_topk(*args))


GROUPED_TOPK = define("grouped_topk", _grouped_topk, _grouped_topk_fake, _grouped_topk_cuda)
