import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

# What the renderer sets (one line each, replaced whole): threads per CTA (one CTA per output column), whether a
# bias is added, and the activation after it (0 none, 1 relu, 2 exact gelu, 3 silu, 4 tanh).
THREADS = 128
HAS_BIAS = False
ACT = 0

MAX_ROWS = 16  # rows of a the GEMV takes; past this a GEMM's tiles reuse the weight, and cuBLAS runs the call
_MAX_THREADS = 1024
_MAX_VPT = 16  # 16-byte vectors a thread holds of its column's weight row; longer rows take more threads


@cute.jit
def _load_share(g: cute.Tensor, r: cute.Tensor, tidx: cutlass.Int32, nvec: cutlass.Constexpr[int],
                vpt: cutlass.Constexpr[int], threads: cutlass.Constexpr[int]):
    """The thread's vectors ``tidx + j * threads`` (j < vpt) of the row ``g`` (nvec, vec) into ``r`` (vpt, vec);
    those past the row's end are left as they are."""
    for j in cutlass.range_constexpr(vpt):
        i = tidx + j * threads
        if cutlass.const_expr((j + 1) * threads <= nvec):  # every thread's vector j is inside the row
            cute.autovec_copy(g[i, None], r[j, None])
        else:
            if i < nvec:
                cute.autovec_copy(g[i, None], r[j, None])


@cute.kernel
def _gemv_kernel(
    gA: cute.Tensor,  # (m, nvec, vec): the rows of a as whole vectors
    gW: cute.Tensor,  # (n, nvec, vec): the weight, one output column a row
    gB: cute.Tensor,  # (n,); never read without a bias
    gY: cute.Tensor,  # (m, n)
    m: cutlass.Constexpr[int],
    nvec: cutlass.Constexpr[int],
    vec: cutlass.Constexpr[int],
    vpt: cutlass.Constexpr[int],
    threads: cutlass.Constexpr[int],
):
    tidx, _, _ = cute.arch.thread_idx()
    col, _, _ = cute.arch.block_idx()
    warps = threads // 32
    # every weight vector of the thread's share is requested before any arithmetic: a GEMV is bound by the
    # weight's bytes, and a CTA retires as soon as its column is summed
    frag = cute.make_layout((vpt, vec), stride=(vec, 1))
    rW = cute.make_rmem_tensor(frag, gW.element_type)
    rW.fill(0)
    _load_share(gW[col, None, None], rW, tidx, nvec, vpt, threads)
    wf = rW.load().to(cutlass.Float32)

    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout((m, warps), stride=(warps, 1)),
                                   byte_alignment=16)
    rA = cute.make_rmem_tensor(frag, gA.element_type)
    for r in cutlass.range_constexpr(m):
        rA.fill(0)
        _load_share(gA[r, None, None], rA, tidx, nvec, vpt, threads)
        s = (rA.load().to(cutlass.Float32) * wf).reduce(cute.ReductionOp.ADD, init_val=cutlass.Float32(0.0),
                                                         reduction_profile=0)
        s = cute.arch.warp_reduction_sum(s)
        if tidx % 32 == 0:
            partial[r, tidx // 32] = s
    bias = cutlass.Float32(0.0)
    if cutlass.const_expr(HAS_BIAS):
        bias = gB[col].to(cutlass.Float32)
    cute.arch.barrier()
    # thread r finishes row r: the warps' sums in warp order (the same sum on every run), then the epilogue
    for r in cutlass.range_constexpr(m):
        if tidx == r:
            acc = partial[r, 0]
            for w in cutlass.range_constexpr(1, warps):
                acc = acc + partial[r, w]
            if cutlass.const_expr(HAS_BIAS):
                acc = acc + bias
            if cutlass.const_expr(ACT == 1):
                acc = cute.arch.fmax(acc, cutlass.Float32(0.0))
            if cutlass.const_expr(ACT == 2):
                acc = cutlass.Float32(0.5) * acc * (cutlass.Float32(1.0) + cute.math.erf(
                    acc * cutlass.Float32(0.7071067811865476)))
            if cutlass.const_expr(ACT == 3):
                acc = acc / (cutlass.Float32(1.0) + cute.math.exp(-acc, fastmath=False))
            if cutlass.const_expr(ACT == 4):
                acc = cute.math.tanh(acc, fastmath=False)
            gY[r, col] = acc.to(gY.element_type)


@cute.jit
def _gemv_launch(
    mA: cute.Tensor,  # (m, k)
    mW: cute.Tensor,  # (n, k)
    mB: cute.Tensor,  # (n,)
    mY: cute.Tensor,  # (m, n)
    stream: cuda.CUstream,
    vectorised: cutlass.Constexpr[bool],
    threads: cutlass.Constexpr[int],
):
    m, k = mA.shape
    n = mW.shape[0]
    vec = 128 // mA.element_type.width if vectorised else 1
    nvec = k // vec
    vpt = (nvec + threads - 1) // threads
    gA = cute.make_tensor(mA.iterator, cute.make_layout((m, nvec, vec), stride=(k, vec, 1)))
    gW = cute.make_tensor(mW.iterator, cute.make_layout((n, nvec, vec), stride=(k, vec, 1)))
    _gemv_kernel(gA, gW, mB, mY, m, nvec, vec, vpt, threads).launch(
        grid=[n, 1, 1], block=[threads, 1, 1], smem=m * (threads // 32) * 4 + 16, stream=stream
    )


def threads_for(k: int, vec: int) -> int:
    """THREADS, or more (in whole warps, up to 1024) where a row of k would need over _MAX_VPT vectors a thread."""
    nvec = k // vec
    need = -(-nvec // _MAX_VPT)
    threads = max(THREADS, -(-need // 32) * 32)
    if threads > _MAX_THREADS:
        raise ValueError(f"a row of {k} elements needs {threads} threads, more than {_MAX_THREADS}")
    return threads


def compile_gemv(a, w, bias, y, stream, vectorised: bool, threads: int, options: str = ""):
    """The compiled launcher for these CuTe tensors (real or fake ones: ``cute.runtime.make_fake_*``)."""
    return cute.compile(_gemv_launch, a, w, bias, y, stream, vectorised, threads, options=options)


_compiled = {}


def _torch_linear(a: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor) -> None:
    """What the reference computes (cuBLAS, then the activation on the rounded product), for calls of many rows."""
    out = torch.nn.functional.linear(a, w, bias if HAS_BIAS else None)
    act = {0: None, 1: torch.relu, 2: torch.nn.functional.gelu, 3: torch.nn.functional.silu, 4: torch.tanh}[ACT]
    y.copy_(out if act is None else act(out))


def _gemv(a: torch.Tensor, w: torch.Tensor, bias, y: torch.Tensor) -> None:
    """y = act(a @ w.T + bias) over a's rows (a [..., K], w [N, K], y [..., N]); the GEMV compiled per dtype and
    shape up to MAX_ROWS rows, torch's linear beyond."""
    k, n = a.shape[-1], w.shape[0]
    a2, y2 = a.reshape(-1, k), y.view(-1, n)
    if a2.shape[0] == 0 or n == 0:
        return
    if a2.shape[0] > MAX_ROWS or not (a.is_contiguous() and w.is_contiguous() and y.is_contiguous()):
        _torch_linear(a, w, bias, y)
        return
    bias = bias if HAS_BIAS else w.reshape(-1)[:n]
    vec = 16 // a.element_size()
    vectorised = k % vec == 0 and all(t.data_ptr() % 16 == 0 for t in (a2, w))
    threads = threads_for(k, vec if vectorised else 1)
    align = 16 if vectorised else a.element_size()
    args = (
        from_dlpack(a2, assumed_align=align),
        from_dlpack(w, assumed_align=align),
        from_dlpack(bias, assumed_align=a.element_size()),
        from_dlpack(y2, assumed_align=a.element_size()),
        cuda.CUstream(torch.cuda.current_stream().cuda_stream),
    )
    key = (a.dtype, tuple(a2.shape), n, vectorised)
    if key not in _compiled:  # compile once per dtype and shape (not an output cache)
        _compiled[key] = compile_gemv(*args, vectorised, threads)
    _compiled[key](*args)
