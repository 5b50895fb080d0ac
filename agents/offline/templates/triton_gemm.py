"""The Triton GEMM pieces the GEMM, MHA and MLP templates render: a tiled GEMM kernel with an epilogue (and its
split-K, three-way, TMA and atomic forms), the split-K sum kernel, and the host helpers that size tiles and make
tensor descriptors.

Kernel: tiled tl.dot (WGMMA on Hopper) with fp32 accumulators, grouped program order for L2 reuse, the epilogue
applied before the one store. K not a multiple of BK is masked; for bf16 inputs tl.dot accumulates in fp32 like
cuBLAS, and float32 inputs multiply exactly (no TF32), as the reference's fp32 matmul does.
"""

from __future__ import annotations

from .base import TRITON_GDC_ENTRY, TRITON_GDC_PARAM, kernel_source

BIAS_EPILOGUE = "acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]"


def triton_gemm_kernel(name: str, epilogue: list[str], three_way: bool = False, split_k: bool = False,
                       sum_in_launch: bool = False, tma: bool = False, atomic: str | None = None,
                       zero: bool = False) -> str:
    """A tiled GEMM ``name(a, b, bias, c, M, N, K, strides..., BM, BN, BK, GROUP)``: grouped program order,
    fp32 accumulators ``acc`` [BM, BN] over rows ``rm`` and columns ``rn``, then ``epilogue`` (lines of
    Triton, e.g. ``BIAS_EPILOGUE`` and an activation) before the one store in c's dtype.

    ``three_way``: one launch for three GEMMs of one A (grid axis 1 picks which): after ``scn`` the kernel
    takes the second and third B's and biases as element offsets from the first (``b_off1, b_off2,
    bias_off1, bias_off2``; separate tensors of one dtype and layout) and the output's stride between the
    three results (``scz``).

    ``split_k``: grid axis 1 splits K into slices of ``k_per`` (a multiple of BK); slice s writes its fp32
    partial sums to ``c + s * scs`` (a workspace), which a second kernel adds up (``SPLIT_SUM``). Only for
    linear epilogues, which that kernel applies: an activation of a partial sum is not the activation.

    ``sum_in_launch`` (with ``split_k``): no second kernel. The partial sums go to ``ws_ptr + s * scs``
    ([SPLIT, M, N] fp32) and ``c`` is the output: each program counts itself in on its tile's arrival counter
    (``cnt_ptr + pid``, int32, zero before the launch), and the one that arrives last adds the SPLIT partials
    (read through L2), the bias when ``HAS_BIAS``, stores the tile and sets the counter back to zero.

    ``tma``: ``a_ptr`` and ``b_ptr`` are tensor descriptors (``TMA_DESCRIPTORS``), A [M, K] in blocks [BM, BK]
    and B as stored by a linear layer, [N, K] in blocks [BN, BK]; the copy engine fetches the tiles and fills
    rows and columns past the edges with zeros, so the loop has no masks (``sam``-``sbn`` are unused).

    ``atomic`` (with ``split_k``): no second kernel and no workspace. Each slice adds its partial sums into the
    output ``c`` (zero before the launch) by atomic reductions in c's dtype, slice 0 with the bias when
    ``HAS_BIAS``: ``"ptr"`` by element atomics through pointers, ``"desc"`` by the copy engine's bulk tensor
    reduction of the whole tile, ``c_ptr`` then being a descriptor of c in blocks [BM, BN]. The order of the
    additions varies from run to run.

    ``zero``: the kernel also stores zeros over ``z_ptr[:z_numel]`` (grid-stride, before its K loop): the output
    of an ``atomic`` launch that follows, with no memset of its own."""
    if three_way and tma:
        raise ValueError("a three-way GEMM launch reads through pointers, not tensor descriptors")
    if three_way and split_k:
        raise ValueError("a GEMM launch is either three-way or split over K, not both")
    if sum_in_launch and not split_k:
        raise ValueError("sum_in_launch adds up the slices of a split_k launch")
    if atomic not in (None, "ptr", "desc") or (atomic and (not split_k or sum_in_launch)):
        raise ValueError(f"atomic is 'ptr' or 'desc', for a split_k launch without sum_in_launch, not {atomic!r}")
    lines = "\n    ".join(epilogue)
    pointer_body = """ka = k0 + rk
        av = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        bv = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        if av.dtype == tl.float32:  # exact, as the reference's fp32 matmul (no TF32)
            acc = tl.dot(av, bv, acc, input_precision="ieee")
        else:
            acc = tl.dot(av, bv, acc)"""
    tma_body = """av = a_ptr.load([pid_m * BM, k0])
        bv = b_ptr.load([pid_n * BN, k0])
        if av.dtype == tl.float32:  # exact, as the reference's fp32 matmul (no TF32)
            acc = tl.dot(av, bv.T, acc, input_precision="ieee")
        else:
            acc = tl.dot(av, bv.T, acc)"""
    extra, pick, k_range = "", "", "0, K, BK"
    slice_pick = """
    s = tl.program_id(1)
    k_lo = s * k_per"""  # grid axis 1: the program's slice of K
    if three_way:
        extra = " b_off1, b_off2, bias_off1, bias_off2, scz,"
        pick = """
    z = tl.program_id(1).to(tl.int64)
    b_ptr += (z == 1).to(tl.int64) * b_off1 + (z == 2).to(tl.int64) * b_off2
    bias_ptr += (z == 1).to(tl.int64) * bias_off1 + (z == 2).to(tl.int64) * bias_off2
    c_ptr += z * scz"""
    if split_k:
        extra = " k_per, scs,"
        pick = slice_pick + """
    c_ptr += s.to(tl.int64) * scs"""
        k_range = "k_lo, k_lo + k_per, BK"  # the last slice may run past K: its loads are masked
    consts, store = "", f"""tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))"""
    if atomic:
        extra = " k_per,"
        consts = " HAS_BIAS: tl.constexpr,"
        pick = slice_pick
        bias = f"""if HAS_BIAS:
        if s == 0:
            {BIAS_EPILOGUE}
    """
        if atomic == "desc":  # the tile's rows and columns past the edges are clipped by the copy engine
            store = bias + "c_ptr.atomic_add([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype))"
        else:
            store = bias + """tl.atomic_add(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
                  mask=(rm[:, None] < M) & (rn[None, :] < N), sem="relaxed")"""
    if sum_in_launch:
        extra = " k_per, scs, ws_ptr, cnt_ptr,"
        consts = " SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr,"
        pick = slice_pick
        # the barrier puts every thread's partial sums before the release of the arrival (threadFenceReduction)
        store = f"""mk = (rm[:, None] < M) & (rn[None, :] < N)
    tile = rm[:, None] * N + rn[None, :]
    tl.store(ws_ptr + s.to(tl.int64) * scs + tile, acc, mask=mk)
    tl.debug_barrier()
    arrived = tl.atomic_add(cnt_ptr + pid, 1, sem="acq_rel")
    if arrived == SPLIT - 1:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for t in tl.static_range(SPLIT):
            acc += tl.load(ws_ptr + t * scs + tile, mask=mk, other=0.0, cache_modifier=".cg")
        if HAS_BIAS:
            {BIAS_EPILOGUE}
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mk)
        tl.atomic_xchg(cnt_ptr + pid, 0)"""
    zeros = ""
    if zero:
        extra += " z_ptr, z_numel,"
        consts += " ZB: tl.constexpr,"
        zeros = """
    zr = tl.arange(0, ZB)
    for z0 in range(tl.program_id(0) * ZB, z_numel, tl.num_programs(0) * ZB):
        tl.store(z_ptr + z0 + zr, tl.zeros((ZB,), dtype=z_ptr.dtype.element_ty), mask=z0 + zr < z_numel)"""
    return f"""
@triton.jit
def {name}(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,{extra}
          {consts} BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, {TRITON_GDC_PARAM}):
    {TRITON_GDC_ENTRY}
    pid = tl.program_id(0){pick}{zeros}
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP * grid_n
    first_m = (pid // width) * GROUP
    rows_here = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % rows_here
    pid_n = (pid % width) // rows_here
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range({k_range}):
        {tma_body if tma else pointer_body}
    {lines}
    {store}
"""


# Small-M GEMMs (a few hundred tokens) leave most SMs idle with 64x128 tiles: the rendered launches narrow
# the column tile, down to 32, until the grid covers the device's SMs (`_fit_bn`). Off CUDA, one "SM".
FIT_TILES = kernel_source("fit_tiles.py")


# Host side of ``tma`` GEMMs (``triton_gemm_kernel(..., tma=True)``): descriptors, and whether every operand
# can have one. Rendered files fall back to the pointer kernels where it cannot.
TMA_DESCRIPTORS = kernel_source("tma_descriptors.py")

# Adds up split_k partial sums [SPLIT, M, N] (fp32, contiguous) into c, with an optional bias: one row per
# program along grid axis 0, column blocks along axis 1.
SPLIT_SUM = kernel_source("split_sum.py")
