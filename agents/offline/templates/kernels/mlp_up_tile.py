
@triton.jit
def _up_tile(x_ptr, w1_ptr, b1_ptr, h_ptr, M, K, I, sxm, sxk, sw1i, sw1k, pid_m, pid_i,
             HAS_B1: tl.constexpr, TMA: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One tile of both MLP files' up projection: rows ``pid_m`` and hidden columns ``pid_i`` of
    h = act(x @ w1^T + b1), accumulated in float32 from descriptor loads (``TMA``) or masked pointer loads."""
    rm = pid_m * BM + tl.arange(0, BM)
    ri = pid_i * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if TMA:
            av = x_ptr.load([pid_m * BM, k0])
            bv = w1_ptr.load([pid_i * BN, k0])
            acc = tl.dot(av, bv.T, acc)
        else:
            ka = k0 + rk
            av = tl.load(x_ptr + rm[:, None] * sxm + ka[None, :] * sxk, mask=(rm[:, None] < M) & (ka[None, :] < K),
                         other=0.0)
            bv = tl.load(w1_ptr + ka[:, None] * sw1k + ri[None, :] * sw1i, mask=(ka[:, None] < K) & (ri[None, :] < I),
                         other=0.0)
            acc = tl.dot(av, bv, acc)
    if HAS_B1:
        acc += tl.load(b1_ptr + ri, mask=ri < I, other=0.0).to(tl.float32)[None, :]
    v = acc
    acc = {act}
    tl.store(h_ptr + rm[:, None] * I + ri[None, :], acc.to(h_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (ri[None, :] < I))
