import torch


class Lazy(torch.Tensor):
    pass


def run(x):
    return torch.softmax(x, dim=-1).as_subclass(Lazy)
