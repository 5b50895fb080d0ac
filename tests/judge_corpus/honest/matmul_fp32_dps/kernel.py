import torch


def run(a, b, c):
    torch.matmul(a, b, out=c)
