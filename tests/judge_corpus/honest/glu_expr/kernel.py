import torch


def run(x, y):
    h = x.shape[-1] // 2
    torch.mul(x[:, :h], torch.sigmoid(x[:, h:]), out=y)
