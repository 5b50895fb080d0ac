

_COUNTERS = {}


def _arrival_counters(like, n):
    have = _COUNTERS.get(like.device)
    if have is None or have.numel() < n:
        have = _COUNTERS[like.device] = torch.zeros(max(n, 1024), dtype=torch.int32, device=like.device)
    return have
