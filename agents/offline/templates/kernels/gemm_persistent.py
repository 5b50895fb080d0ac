
# A persistent GEMM through tensor descriptors: C [M, N] = act(A [M, K] @ W [N, K]^T + bias) (W a linear layer's
# weight as stored). One program per SM walks the output tiles (grouped order, as the tiled kernel's, for L2
# reuse), so the next tile's loads overlap the last one's epilogue; the copy engine fetches the tiles (zero-filled
# past the edges, no masks) and stores C, in two halves of BN // 2 columns when SUBTILE (half the registers for the
# cast and store). WARP_SPECIALIZE hands the loads to a producer warp group where Triton supports it on the device.
# The epilogue runs on the fp32 accumulator: HAS_BIAS adds bias [N], then ``_gemm_act`` (``gemm_act.py``, in the
# same source) applies ACT. PRECISION is tl.dot's input precision: "ieee" keeps float32 operands exact (no TF32).
# Host side: ``TMA_DESCRIPTORS`` (``_desc``, ``_tma_ready``) in the same file.


@triton.jit
def _gemm_persistent(a_desc, w_desc, c_desc, bias_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, GROUP: tl.constexpr, PROGRAMS: tl.constexpr, SUBTILE: tl.constexpr,
                     WARP_SPECIALIZE: tl.constexpr, HAS_BIAS: tl.constexpr = False, ACT: tl.constexpr = "none",
                     PRECISION: tl.constexpr = "tf32"):
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    width = GROUP * grid_n
    for tile in tl.range(tl.program_id(0), grid_m * grid_n, PROGRAMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
        first_m = (tile // width) * GROUP
        rows_here = min(grid_m - first_m, GROUP)
        pid_m = first_m + (tile % width) % rows_here
        pid_n = (tile % width) // rows_here
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            av = a_desc.load([pid_m * BM, kt * BK])
            wv = w_desc.load([pid_n * BN, kt * BK])
            acc = tl.dot(av, wv.T, acc, input_precision=PRECISION)
        if HAS_BIAS:
            rn = pid_n * BN + tl.arange(0, BN)
            acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        acc = _gemm_act(acc, ACT)
        if SUBTILE:
            halves = tl.reshape(acc, (BM, 2, BN // 2)).permute(0, 2, 1)
            left, right = tl.split(halves)
            c_desc.store([pid_m * BM, pid_n * BN], left.to(c_desc.dtype))
            c_desc.store([pid_m * BM, pid_n * BN + BN // 2], right.to(c_desc.dtype))
        else:
            c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


def _programs(device):
    # one program per SM on CUDA; off CUDA (the interpreter) a few, so the tile loop runs more than once
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 3


def gemm_persistent(a, w, bm, bn, bk, group, num_warps, num_stages, subtile=False, warp_specialize=False, bias=None,
                    act="none", out=None):
    """``act(a @ w.t() + bias)`` for ``a`` [M, K] and ``w`` [N, K], both ``_tma_ready`` (as is the [M, N] output,
    ``out`` when given); float32 operands multiply exactly (no TF32)."""
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device) if out is None else out
    step = _programs(a.device)  # a constant per device (one compile); fewer tiles than that: one program each
    grid = (min(step, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    _gemm_persistent[grid](_desc(a, bm, bk), _desc(w, bn, bk), _desc(c, bm, bn // 2 if subtile else bn),
                           a if bias is None else bias, M, N, K, BM=bm, BN=bn, BK=bk, GROUP=group, PROGRAMS=step,
                           SUBTILE=subtile, WARP_SPECIALIZE=warp_specialize, HAS_BIAS=bias is not None, ACT=act,
                           PRECISION="ieee" if a.dtype == torch.float32 else "tf32", num_warps=num_warps,
                           num_stages=num_stages)
    return c
