

# Host side of the split-K GEMM through tensor descriptors (``_gemm_split``: ``triton_gemm_kernel(..., split_k=True,
# sum_in_launch=True, tma=True)``), for a weight as stored: K in ``split`` slices of fp32 partial sums, which the last
# slice of each tile to finish adds up (with the bias) in the same launch. Needs ``TMA_DESCRIPTORS``, ``FIT_TILES``
# and the arrival counters in the same file.


def split_for(a, w, bm=64, bn=128, bk=64):
    # the K split that fills the SMs with 64x128 tiles over a long K (1: none)
    return _fit_split(triton.cdiv(a.shape[0], bm) * triton.cdiv(w.shape[0], bn), a.shape[1], bk, _sms(a))


def gemm_split(a, w, split, bias=None, out=None, bm=64, bn=128, bk=64, num_warps=4, num_stages=4):
    """``a @ w.t() + bias`` into ``out`` (a new [M, N] tensor when None), K split in ``split`` slices."""
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device) if out is None else out
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    k_per = triton.cdiv(triton.cdiv(K, bk), split) * bk
    ws = torch.empty((split, M, N), dtype=torch.float32, device=a.device)
    _gemm_split[(tiles, split)](_desc(a, bm, bk), _desc(w, bn, bk), a if bias is None else bias, c, M, N, K, 0, 0,
                                0, 0, c.stride(0), c.stride(1), k_per, M * N, ws, _arrival_counters(c, tiles),
                                SPLIT=split, HAS_BIAS=bias is not None, BM=bm, BN=bn, BK=bk, GROUP=8,
                                num_warps=num_warps, num_stages=num_stages)
    return c
