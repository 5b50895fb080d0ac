def row_max(x):
    return x.amax(dim=-1, keepdim=True)
