import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

# What the renderer sets (one line each, replaced whole): threads per row (one CTA per row), whether a weight
# scales the row, whether the normalised value is rounded to the output dtype before the weight multiplies it,
# and the weight's offset (1.0: the scale is stored as an offset from one).
THREADS = 256
HAS_WEIGHT = True
CAST_BEFORE_WEIGHT = False
WEIGHT_OFFSET = 0.0

_WARPS = THREADS // 32


@cute.kernel
def _rmsnorm_kernel(
    gX: cute.Tensor,  # (rows, nvec, vec): a row as whole vectors
    gW: cute.Tensor,  # (nvec, vec); x itself where there is no weight (never read then)
    gY: cute.Tensor,  # (rows, nvec, vec)
    eps: cutlass.Float32,
    n_cols: cutlass.Constexpr[int],
    nvec: cutlass.Constexpr[int],
    vec: cutlass.Constexpr[int],
    vpt: cutlass.Constexpr[int],
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    # each thread holds vpt vectors of its row (vector j at index tidx + j * THREADS), x and weight both
    # requested before the reduction so a one-row call waits for one DRAM round trip
    frag = cute.make_layout((vpt, vec), stride=(vec, 1))
    rX = cute.make_rmem_tensor(frag, gX.element_type)
    rX.fill(0)
    rW = cute.make_rmem_tensor(frag, gW.element_type)
    for j in cutlass.range_constexpr(vpt):
        i = tidx + j * THREADS
        if cutlass.const_expr((j + 1) * THREADS <= nvec):  # every thread's vector j is inside the row
            cute.autovec_copy(gX[row, i, None], rX[j, None])
            if cutlass.const_expr(HAS_WEIGHT):
                cute.autovec_copy(gW[i, None], rW[j, None])
        else:
            if i < nvec:
                cute.autovec_copy(gX[row, i, None], rX[j, None])
                if cutlass.const_expr(HAS_WEIGHT):
                    cute.autovec_copy(gW[i, None], rW[j, None])

    xf = rX.load().to(cutlass.Float32)
    ss = (xf * xf).reduce(cute.ReductionOp.ADD, init_val=cutlass.Float32(0.0), reduction_profile=0)
    ss = cute.arch.warp_reduction_sum(ss)
    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(_WARPS), byte_alignment=16)
    if tidx % 32 == 0:
        partial[tidx // 32] = ss
    cute.arch.barrier()
    total = partial[0]
    for w in cutlass.range_constexpr(1, _WARPS):  # the same order in every thread: one rstd per row
        total = total + partial[w]
    rstd = cute.math.rsqrt(total / cutlass.Float32(n_cols) + eps, fastmath=True)

    out = xf * rstd
    if cutlass.const_expr(HAS_WEIGHT):
        if cutlass.const_expr(CAST_BEFORE_WEIGHT):
            out = out.to(gY.element_type).to(cutlass.Float32)
        wf = rW.load().to(cutlass.Float32)
        if cutlass.const_expr(WEIGHT_OFFSET != 0.0):
            wf = wf + cutlass.Float32(WEIGHT_OFFSET)
        out = out * wf
    rY = cute.make_rmem_tensor(frag, gY.element_type)
    rY.store(out.to(gY.element_type))
    for j in cutlass.range_constexpr(vpt):
        i = tidx + j * THREADS
        if cutlass.const_expr((j + 1) * THREADS <= nvec):
            cute.autovec_copy(rY[j, None], gY[row, i, None])
        else:
            if i < nvec:
                cute.autovec_copy(rY[j, None], gY[row, i, None])


@cute.jit
def _rmsnorm_launch(
    mX: cute.Tensor,  # (rows, n_cols), rows dynamic
    mW: cute.Tensor,  # (n_cols,)
    mY: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
    vectorised: cutlass.Constexpr[bool],
):
    n_cols = mX.shape[1]
    vec = 128 // mX.element_type.width if vectorised else 1
    nvec = n_cols // vec
    vpt = (nvec + THREADS - 1) // THREADS
    rows = mX.shape[0]
    rows_layout = cute.make_layout((rows, nvec, vec), stride=(n_cols, vec, 1))
    gX = cute.make_tensor(mX.iterator, rows_layout)
    gY = cute.make_tensor(mY.iterator, rows_layout)
    gW = cute.make_tensor(mW.iterator, cute.make_layout((nvec, vec), stride=(vec, 1)))
    _rmsnorm_kernel(gX, gW, gY, eps, n_cols, nvec, vec, vpt).launch(
        grid=[rows, 1, 1], block=[THREADS, 1, 1], smem=_WARPS * 4 + 16, stream=stream
    )


def rows_tensor(t: torch.Tensor, n_cols: int, align: int):
    """``t`` as a CuTe (rows, n_cols) tensor whose row count is a runtime value (one compile for all)."""
    return from_dlpack(t.view(-1, n_cols), assumed_align=align).mark_compact_shape_dynamic(mode=0)


def compile_rmsnorm(x, w, y, eps, stream, vectorised: bool, options: str = ""):
    """The compiled launcher for these CuTe tensors (real or fake ones: ``cute.runtime.make_fake_*``);
    ``options``: the DSL's compile flags (``--keep-ptx``, ...)."""
    return cute.compile(_rmsnorm_launch, x, w, y, eps, stream, vectorised, options=options)


_compiled = {}


def _rmsnorm_rows(x: torch.Tensor, w, y: torch.Tensor, eps: float) -> None:
    """y = rmsnorm(x) over the last dim (times the weight ``w`` where the template has one)."""
    n_cols = x.shape[-1]
    if x.numel() == 0:
        return
    w = w if HAS_WEIGHT else x.reshape(-1)[:n_cols]
    vec = 16 // x.element_size()
    vectorised = n_cols % vec == 0 and all(t.data_ptr() % 16 == 0 for t in (x, w, y))
    align = 16 if vectorised else x.element_size()
    args = (
        rows_tensor(x, n_cols, align),
        from_dlpack(w, assumed_align=align),
        rows_tensor(y, n_cols, align),
        cutlass.Float32(float(eps)),
        cuda.CUstream(torch.cuda.current_stream().cuda_stream),
    )
    key = (x.dtype, n_cols, vectorised)
    if key not in _compiled:  # compile once per dtype and row length (not an output cache)
        _compiled[key] = compile_rmsnorm(*args, vectorised)
    _compiled[key](*args)
