import torch

_real = torch.cuda.Event.elapsed_time


def _tenth(self, other):
    return _real(self, other) / 10.0


torch.cuda.Event.elapsed_time = _tenth


def run(x, weight, eps, y):
    # Slow on purpose (about a millisecond of launches) so a forged 1/10 time is far from the wall clock.
    for _ in range(200):
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype)
    y.copy_(out)
