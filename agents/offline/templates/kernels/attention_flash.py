
@triton.jit
def _packed_rows(HKV, SQ, GROUP: tl.constexpr, TILE_HEADS: tl.constexpr, BLOCK_M: tl.constexpr):
    """This program's block of packed rows (query head within the KV head's group, query): axis 0 picks the
    block, axis 1 the batch x KV head. Batch, KV head, the rows, which of them exist, each one's query head
    and position."""
    pid_bh = tl.program_id(1)
    b = (pid_bh // HKV).to(tl.int64)
    hk = pid_bh % HKV
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < GROUP * SQ
    j = rows // SQ
    s = rows % SQ
    if TILE_HEADS:
        h = j * HKV + hk
    else:
        h = hk * GROUP + j
    return b, hk, rows, row_ok, h, s


@triton.jit
def _split_rows(rows, sp, NSPLIT, SQ, GROUP: tl.constexpr):
    """Where split ``sp`` of ``NSPLIT`` keeps ``rows`` of this program's batch x KV head in the workspace."""
    return ((tl.program_id(1) * NSPLIT + sp) * (GROUP * SQ)).to(tl.int64) + rows


@triton.jit
def _store_normalized(O, acc, l, b, h, s, d, sob, soh, sos, sod, row_ok):
    """The rows' output: the weighted sum over the softmax's denominator (a row with no key left at zero)."""
    o = acc / tl.where(l == 0.0, 1.0, l)[:, None]
    tl.store(O + b * sob + h[:, None] * soh + s[:, None] * sos + d[None, :] * sod,
             o.to(O.dtype.element_ty), mask=row_ok[:, None])


@triton.jit
def _attn_fwd(Q, K, V, O, MW, LW, AW,
              sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod,
              HKV, SQ, SKV, qk_scale, causal_shift, kv_chunk,
              GROUP: tl.constexpr, TILE_HEADS: tl.constexpr, CAUSAL: tl.constexpr, SPLIT: tl.constexpr,
              HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr,
              GDC: tl.constexpr = False):
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid_s = tl.program_id(2)
    b, hk, rows, row_ok, h, s = _packed_rows(HKV, SQ, GROUP, TILE_HEADS, BLOCK_M)
    d = tl.arange(0, HEAD_D)
    q = tl.load(Q + b * sqb + h[:, None] * sqh + s[:, None] * sqs + d[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    lo = pid_s * kv_chunk
    hi = tl.minimum(lo + kv_chunk, SKV)
    if CAUSAL:
        hi = tl.minimum(hi, tl.max(tl.where(row_ok, s, 0), 0) + causal_shift + 1)
    # a finite floor keeps exp2(m_old - m_new) defined when a whole tile of a row is masked
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    kbase = K + b * skb + hk * skh
    vbase = V + b * svb + hk * svh
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < hi
        kt = tl.load(kbase + cols[None, :] * sks + d[:, None] * skd, mask=col_ok[None, :], other=0.0)
        if DOT_F32:
            qk = tl.dot(q.to(tl.float32), kt.to(tl.float32)) * qk_scale
        else:
            qk = tl.dot(q, kt) * qk_scale
        keep = col_ok[None, :]
        if CAUSAL:
            keep = keep & (cols[None, :] <= s[:, None] + causal_shift)
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vt = tl.load(vbase + cols[:, None] * svs + d[None, :] * svd, mask=col_ok[:, None], other=0.0)
        if DOT_F32:
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype).to(tl.float32), vt.to(tl.float32))
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    if SPLIT:
        ws = _split_rows(rows, pid_s, tl.num_programs(2), SQ, GROUP)
        tl.store(MW + ws, m_i, mask=row_ok)
        tl.store(LW + ws, l_i, mask=row_ok)
        tl.store(AW + ws[:, None] * HEAD_D + d[None, :], acc, mask=row_ok[:, None])
    else:
        _store_normalized(O, acc, l_i, b, h, s, d, sob, soh, sos, sod, row_ok)


@triton.jit
def _attn_merge(O, MW, LW, AW, sob, soh, sos, sod, HKV, SQ, NSPLIT,
                GROUP: tl.constexpr, TILE_HEADS: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr,
                GDC: tl.constexpr = False):
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    b, hk, rows, row_ok, h, s = _packed_rows(HKV, SQ, GROUP, TILE_HEADS, BLOCK_M)
    d = tl.arange(0, HEAD_D)
    m = tl.full([BLOCK_M], -1.0e30, tl.float32)
    for sp in range(0, NSPLIT):
        ws = _split_rows(rows, sp, NSPLIT, SQ, GROUP)
        m = tl.maximum(m, tl.load(MW + ws, mask=row_ok, other=-1.0e30))
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    for sp in range(0, NSPLIT):
        ws = _split_rows(rows, sp, NSPLIT, SQ, GROUP)
        w = tl.math.exp2(tl.load(MW + ws, mask=row_ok, other=-1.0e30) - m)
        l += w * tl.load(LW + ws, mask=row_ok, other=0.0)
        acc += w[:, None] * tl.load(AW + ws[:, None] * HEAD_D + d[None, :], mask=row_ok[:, None], other=0.0)
    _store_normalized(O, acc, l, b, h, s, d, sob, soh, sos, sod, row_ok)
