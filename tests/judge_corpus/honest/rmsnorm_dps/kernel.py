import torch


def run(x, weight, eps, y):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y.copy_((xf * inv * weight.float()).to(y.dtype))
