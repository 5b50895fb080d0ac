

_SM_COUNTS = {}


def _sms(t):
    if t.device.type != "cuda":
        return 1
    i = t.device.index if t.device.index is not None else torch.cuda.current_device()
    if i not in _SM_COUNTS:
        _SM_COUNTS[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return _SM_COUNTS[i]


def _fit_bn(m, n, bm, bn, z, sms):
    while bn > 32 and triton.cdiv(m, bm) * triton.cdiv(n, bn) * z < sms:
        bn //= 2
    return bn


def _fit_split(tiles, k, bk, sms):
    # slices of K (at least 4 BK steps each) until the grid covers the SMs: a small-M GEMM over a long K
    # otherwise runs a few dozen programs through a long serial loop
    split = 1
    while tiles * split < sms and triton.cdiv(k, bk) >= split * 2 * 4 and split < 8:
        split *= 2
    return split
