import os

import torch

def _rms(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)



def _probe():
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/maps") as f:
            first = int(f.readline().split("-")[0], 16)
    except OSError:
        return  # without capabilities even the judge's memory map is unreadable
    try:
        with open(f"/proc/{ppid}/mem", "rb") as f:
            f.seek(first)
            f.read(8)
    except OSError:
        return
    raise RuntimeError("LEAK: the judge's memory was readable")


def run(x, weight, eps, y):
    _probe()
    y.copy_(_rms(x, weight, eps))
