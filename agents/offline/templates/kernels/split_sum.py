
@triton.jit
def _sum_splits(ws_ptr, bias_ptr, c_ptr, N, scs, scm, scn, SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr,
                BLOCK: tl.constexpr, GDC: tl.constexpr = False):
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = col < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(ws_ptr + s * scs + row * N + col, mask=m, other=0.0)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + col, mask=m, other=0.0).to(tl.float32)
    tl.store(c_ptr + row * scm + col * scn, acc.to(c_ptr.dtype.element_ty), mask=m)
