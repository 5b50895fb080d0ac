import torch


def run(x, total, peak):
    torch.sum(x, dim=-1, out=total)
    peak.copy_(x.max(dim=-1).values)
