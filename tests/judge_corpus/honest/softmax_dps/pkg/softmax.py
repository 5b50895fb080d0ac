from pkg.helpers import row_max


def run(x, y):
    e = (x - row_max(x)).exp()
    y.copy_(e / e.sum(dim=-1, keepdim=True))
