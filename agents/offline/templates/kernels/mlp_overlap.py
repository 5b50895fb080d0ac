
@triton.jit
def _up_overlap(x_ptr, w1_ptr, b1_ptr, h_ptr, y_ptr, cnt_ptr, M, K, I, N, sxm, sxk, sw1i, sw1k, sym, syn, k_per,
                SPLIT: tl.constexpr, HAS_B1: tl.constexpr, TMA: tl.constexpr, GDC: tl.constexpr,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ZB: tl.constexpr, PAD: tl.constexpr):
    if GDC:  # launched after everything before it: nothing to wait for, only the down launch to allow
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    pid_m = pid % grid_m
    pid_n = pid // grid_m
    first = tl.cdiv(tl.minimum(k_per, I), BN)  # up tiles in slice 0
    if pid_n < first:
        rows = tl.minimum(M - pid_m * BM, BM)
        zr = tl.arange(0, ZB)
        for z0 in range(pid_n * ZB, rows * N, first * ZB):
            e = z0 + zr
            r = (pid_m * BM + e // N).to(tl.int64)
            tl.store(y_ptr + r * sym + (e % N) * syn, tl.zeros((ZB,), dtype=y_ptr.dtype.element_ty), mask=e < rows * N)
    _up_tile(x_ptr, w1_ptr, b1_ptr, h_ptr, M, K, I, sxm, sxk, sw1i, sw1k, pid_m, pid_n, HAS_B1, TMA, BM, BN, BK)
    # every thread's stores (and zeros) before the release of the count (as threadFenceReduction)
    tl.debug_barrier()
    tl.atomic_add(cnt_ptr + (pid_m * SPLIT + (pid_n * BN) // k_per) * PAD, 1, sem="release")


@triton.jit
def _down_overlap(h_ptr, w2_ptr, b2_ptr, y_ptr, cnt_ptr, M, I, N, sw2n, sw2i, sym, syn, k_per, BN1,
                  SPLIT: tl.constexpr, HAS_B2: tl.constexpr, TMA: tl.constexpr, FENCE: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PAD: tl.constexpr, COUNTERS: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.program_id(1)
    grid_m = tl.cdiv(M, BM)
    pid_m = pid % grid_m
    pid_n = pid // grid_m
    k_lo = s * k_per
    k_hi = tl.minimum(k_lo + k_per, I)
    need = tl.cdiv(tl.maximum(k_hi - k_lo, 0), BN1)
    first = tl.cdiv(tl.minimum(k_per, I), BN1)
    while tl.atomic_add(cnt_ptr + pid_m * SPLIT * PAD, 0, sem="acquire") < first:
        pass
    while tl.atomic_add(cnt_ptr + (pid_m * SPLIT + s) * PAD, 0, sem="acquire") < need:
        pass
    tl.debug_barrier()
    if FENCE:  # generic-proxy writes (h, the zeroed output) before copy-engine reads and reductions
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r,r", [pid], dtype=tl.int32,
                                  is_pure=False, pack=1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(k_lo, k_lo + k_per, BK):
        if TMA:  # the copy engine fills columns past I with zeros
            av = h_ptr.load([pid_m * BM, k0])
            bv = w2_ptr.load([pid_n * BN, k0])
            acc = tl.dot(av, bv.T, acc)
        else:
            ka = k0 + rk
            av = tl.load(h_ptr + rm[:, None] * I + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < k_hi),
                         other=0.0)
            bv = tl.load(w2_ptr + ka[:, None] * sw2i + rn[None, :] * sw2n,
                         mask=(ka[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(av, bv, acc)
    if HAS_B2:
        if s == 0:
            acc += tl.load(b2_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if TMA:
        y_ptr.atomic_add([pid_m * BM, pid_n * BN], acc.to(y_ptr.dtype))
    else:
        tl.atomic_add(y_ptr + rm[:, None] * sym + rn[None, :] * syn, acc.to(y_ptr.dtype.element_ty),
                      mask=(rm[:, None] < M) & (rn[None, :] < N), sem="relaxed")
    # the last CTA sets the counters back to zero (every other one has finished its waits) in one plain store:
    # the next launch sees it, and a loop of atomic exchanges would be one round trip each
    tl.debug_barrier()
    done = tl.atomic_add(cnt_ptr + grid_m * SPLIT * PAD, 1, sem="acq_rel")
    if done == tl.num_programs(0) * SPLIT - 1:
        j = tl.arange(0, COUNTERS)
        tl.store(cnt_ptr + j * PAD, tl.zeros((COUNTERS,), dtype=tl.int32), mask=j <= grid_m * SPLIT)
