import torch

_graphs = {}


def _rms_into(x, weight, eps, y):
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))


def run(x, weight, eps, y):
    # One CUDA graph per buffer set, replayed on the caller's stream: one launch instead of six.
    key = (x.data_ptr(), weight.data_ptr(), y.data_ptr(), tuple(x.shape), float(eps))
    if key not in _graphs:
        _rms_into(x, weight, eps, y)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            _rms_into(x, weight, eps, y)
        _graphs[key] = g
    _graphs[key].replay()
