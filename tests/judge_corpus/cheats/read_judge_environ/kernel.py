import os

import torch

def _rms(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)



def _probe():
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/environ", "rb") as f:
            f.read(64)
    except OSError:
        return
    raise RuntimeError("LEAK: the judge's environment was readable")


def run(x, weight, eps, y):
    _probe()
    y.copy_(_rms(x, weight, eps))
