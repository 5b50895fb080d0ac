
@triton.jit
def _mlp_fused(x_ptr, w1_ptr, b1_ptr, h_ptr, w2_ptr, w2r_ptr, b2_ptr, y_ptr, ws_ptr, cnt_ptr,
               M, K, I, N, sxm, sxk, sw1i, sw1k, sw2n, sw2i, sym, syn, k_per, P,
               PHASE: tl.constexpr, SPLIT: tl.constexpr, HAS_B1: tl.constexpr, HAS_B2: tl.constexpr,
               TMA: tl.constexpr, PREFETCH: tl.constexpr, BM: tl.constexpr, BN1: tl.constexpr,
               BK1: tl.constexpr, BN2: tl.constexpr, BK2: tl.constexpr, UP_COUNTERS: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    tiles_i = tl.cdiv(I, BN1)
    tiles_n = tl.cdiv(N, BN2)
    t1 = grid_m * tiles_i
    t2 = grid_m * tiles_n * SPLIT
    up_cnt = cnt_ptr  # [grid_m, SPLIT]: up tiles stored per (row tile, slice)
    dn_cnt = cnt_ptr + grid_m * SPLIT  # [grid_m, tiles_n]: slices summed in per output tile
    fin_cnt = dn_cnt + grid_m * tiles_n  # programs finished
    per_slice = k_per // BN1
    if PREFETCH:
        for item in range(pid, t1 + t2, P):
            if item >= t1:
                u = item - t1
                r = u % (grid_m * tiles_n)
                n_lo = (r // grid_m) * BN2
                k_lo = (u // (grid_m * tiles_n)) * k_per
                rn = n_lo + tl.arange(0, BN2)
                rows = w2r_ptr + rn.to(tl.int64) * sw2n + k_lo * sw2i
                elt: tl.constexpr = w2r_ptr.dtype.element_ty.primitive_bitwidth // 8
                nbytes = tl.zeros((BN2,), dtype=tl.int32) + (tl.minimum(k_per, I - k_lo) * elt).to(tl.int32)
                {prefetch}
    # two loops, each with its K loop directly inside: Triton pipelines those (not ones under an if)
    if PHASE != 2:
        for item in range(pid, t1, P):
            pid_m = item % grid_m
            pid_i = item // grid_m
            _up_tile(x_ptr, w1_ptr, b1_ptr, h_ptr, M, K, I, sxm, sxk, sw1i, sw1k, pid_m, pid_i, HAS_B1, TMA, BM, BN1,
                     BK1)
            # every thread's stores before the release of the count (as threadFenceReduction)
            tl.debug_barrier()
            tl.atomic_add(up_cnt + pid_m * SPLIT + (pid_i * BN1) // k_per, 1, sem="release")
    if PHASE != 1:
        # this program's first down item: the first of pid, pid + P, ... past the up tiles
        first = t1 + pid
        if PHASE == 0:
            first = pid + tl.cdiv(tl.maximum(t1 - pid, 0), P) * P
        for item in range(first, t1 + t2, P):
            u = item - t1
            s = u // (grid_m * tiles_n)
            r = u % (grid_m * tiles_n)
            pid_m = r % grid_m
            pid_n = r // grid_m
            k_lo = s * k_per
            k_hi = tl.minimum(k_lo + k_per, I)
            need = tl.cdiv(tl.maximum(k_hi - k_lo, 0), BN1)
            while tl.atomic_add(up_cnt + pid_m * SPLIT + s, 0, sem="acquire") < need:
                pass
            tl.debug_barrier()
            dm = pid_m * BM + tl.arange(0, BM)
            dn = pid_n * BN2 + tl.arange(0, BN2)
            dk = tl.arange(0, BK2)
            part = tl.zeros((BM, BN2), dtype=tl.float32)
            for k0 in range(k_lo, k_hi, BK2):
                kb = k0 + dk
                hv = tl.load(h_ptr + dm[:, None] * I + kb[None, :], mask=(dm[:, None] < M) & (kb[None, :] < k_hi),
                             other=0.0, cache_modifier=".cg")
                if TMA:
                    wv = w2_ptr.load([pid_n * BN2, k0])
                    part = tl.dot(hv, wv.T, part)
                else:
                    wv = tl.load(w2_ptr + kb[:, None] * sw2i + dn[None, :] * sw2n,
                                 mask=(kb[:, None] < k_hi) & (dn[None, :] < N), other=0.0)
                    part = tl.dot(hv, wv, part)
            mk = (dm[:, None] < M) & (dn[None, :] < N)
            tile = dm[:, None].to(tl.int64) * N + dn[None, :]
            tl.store(ws_ptr + s.to(tl.int64) * M * N + tile, part, mask=mk)
            tl.debug_barrier()
            arrived = tl.atomic_add(dn_cnt + r, 1, sem="acq_rel")
            if arrived == SPLIT - 1:
                total = tl.zeros((BM, BN2), dtype=tl.float32)
                for t in tl.static_range(SPLIT):
                    total += tl.load(ws_ptr + t * M * N + tile, mask=mk, other=0.0, cache_modifier=".cg")
                if HAS_B2:
                    total += tl.load(b2_ptr + dn, mask=dn < N, other=0.0).to(tl.float32)[None, :]
                tl.store(y_ptr + dm[:, None] * sym + dn[None, :] * syn, total.to(y_ptr.dtype.element_ty), mask=mk)
                tl.atomic_xchg(dn_cnt + r, 0)
    if PHASE != 1:
        tl.debug_barrier()
        done = tl.atomic_add(fin_cnt, 1, sem="acq_rel")
        if done == P - 1:  # one store, not a loop of atomic exchanges (one round trip each)
            j = tl.arange(0, UP_COUNTERS)
            tl.store(up_cnt + j, tl.zeros((UP_COUNTERS,), dtype=tl.int32), mask=j < grid_m * SPLIT)
            tl.store(fin_cnt, 0)
