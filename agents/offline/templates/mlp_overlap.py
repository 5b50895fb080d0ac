"""The MLP block as two launches that overlap (``overlap``): the down projection starts while the up one runs.

Why: at a few hundred tokens each GEMM launch spends a quarter to a third of its time with SMs idle, in its
ramp and its tail (Nsight Compute on an H200: the up projection 15.9k cycles elapsed against 11.6k active per
SM, the down one 12.8k against 8.9k), and the unfused file's down projection cannot start until the up
projection's last CTA has finished. The one-launch file (mlp_fused.py) overlapped them but held one CTA per SM.
Here each GEMM keeps its own launch, tiles and occupancy; the down launch is a programmatic dependent launch
that does not wait for the up grid to finish, only for the hidden columns each of its CTAs reads.

Up (grid: row tiles fastest, so the first hidden columns come first): each CTA computes h = act(x·W1ᵀ + b1) for
one [BM, BN1] tile, stores it in the input dtype and counts itself in on its (row tile, K slice) counter. The
CTAs of slice 0 first zero their row tile of the output, so the down slices, which add into the output,
never start from stale values: every down CTA of a row tile waits for slice 0 of that row tile as well as for
its own slice. Each up CTA allows the down launch at its start (``gdc_launch_dependents``): the down grid is
scheduled only once every up CTA has started, so a waiting down CTA never holds an SM an up CTA still needs.

Down (grid: output tiles x SPLIT slices of ``k_per`` hidden columns, slice-major): wait, a proxy fence (the
hidden activations were written by ordinary stores and are read by the copy engine), the K loop over its
slice, b2 on slice 0, and the tile added into the output: the copy engine's bulk reduction under ``tma``,
element atomics otherwise. The last down CTA to finish sets every counter back to zero for the next call.

Off the GPU (the interpreter) the two launches run one after the other and every wait is already met.

Measured on the H200: correct at every point, and slower than the
unfused file with atomic slices: 15.4-19.3 us against 13.9 in-process. The down launch, started early, ends
~2 us after the unfused one would, and the up launch slows 7.1 -> 7.6-7.9 us while the down CTAs poll; spacing
the polls by nanosleep (200 / 1000 ns) changed nothing. A first version reset its counters in a loop of atomic
exchanges, one round trip each (22.7-57 us); they are now reset by one store. Not in the planned grid.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .base import TRITON_ARRIVAL_COUNTERS, TRITON_GDC_READY, Binding
from .matmul import FIT_TILES, TMA_DESCRIPTORS
from .mlp_fused import run_prologue

KERNELS = """
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
    rm = pid_m * BM + tl.arange(0, BM)
    ri = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if TMA:
            av = x_ptr.load([pid_m * BM, k0])
            bv = w1_ptr.load([pid_n * BN, k0])
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
"""


def render_overlap(problem: Problem, b: Binding, p: Mapping[str, Any], act_expr: str | None) -> str:
    """The overlapping file. ``act_expr``: the activation as a Triton expression of fp32 ``v``, or None. Tiles:
    ``bm`` rows for both GEMMs, ``bn``/``bk`` the up projection's, ``down_bn``/``down_bk`` the down one's,
    ``split`` slices (a number), ``tma`` descriptors where every operand can have one."""
    r = b.roles
    w1, w2, b1, b2 = r["w1"], r["w2"], r.get("b1"), r.get("b2")
    bm, bn1, bk1, bn2, bk2 = (int(p[k]) for k in ("bm", "bn", "bk", "down_bn", "down_bk"))
    split, tma = int(p["split"]), bool(p.get("tma"))
    warps, stages = int(p["num_warps"]), int(p["stages"])
    down_warps, down_stages = int(p.get("down_num_warps", warps)), int(p.get("down_stages", stages))
    return f"""import torch
import triton
import triton.language as tl

{KERNELS.replace("{act}", act_expr or "v")}
{FIT_TILES}{TMA_DESCRIPTORS if tma else ""}{TRITON_ARRIVAL_COUNTERS}{TRITON_GDC_READY}


{run_prologue(problem, b)}
    BM, BN1, BK1, BN2, BK2, SPLIT = {bm}, {bn1}, {bk1}, {bn2}, {bk2}, {split}
    # slices of whole up tiles and whole down K steps (both powers of two: the larger is a multiple)
    step = max(BN1, BK2)
    k_per = triton.cdiv(triton.cdiv(hidden, step), SPLIT) * step
    grid_m = triton.cdiv(M, BM)
    # one counter per 128-byte line (PAD int32s): the down CTAs poll them while the up CTAs count in
    PAD, COUNTERS = 32, triton.next_power_of_2(grid_m * SPLIT + 1)
    counters = _arrival_counters(c2, COUNTERS * PAD)
    gdc = _gdc_ready(c2)
    # descriptors only on the GPU: the interpreter has no bulk reduction
    use_tma = {f"_tma_ready(a2, {w1}, {w2}, h, c2) and c2.is_cuda" if tma else "False"}
    if use_tma:
        xo, w1o = _desc(a2, BM, BK1), _desc({w1}, BN1, BK1)
        ho, w2o, yo = _desc(h, BM, BK2), _desc({w2}, BN2, BK2), _desc(c2, BM, BN2)
    else:
        xo, w1o, ho, w2o, yo = a2, {w1}, h, {w2}, c2
    _up_overlap[(grid_m * triton.cdiv(hidden, BN1),)](
        xo, w1o, {b1 or "a2"}, h, c2, counters, M, K, hidden, N, a2.stride(0), a2.stride(1), {w1}.stride(0),
        {w1}.stride(1), c2.stride(0), c2.stride(1), k_per, SPLIT=SPLIT, HAS_B1={b1 is not None}, TMA=use_tma, GDC=gdc,
        BM=BM, BN=BN1, BK=BK1, ZB=1024, PAD=PAD, num_warps={warps}, num_stages={stages})
    # scheduled once every up CTA has started; each CTA waits only for the hidden columns it reads
    _down_overlap[(grid_m * triton.cdiv(N, BN2), SPLIT)](
        ho, w2o, {b2 or "a2"}, yo, counters, M, hidden, N, {w2}.stride(0), {w2}.stride(1), c2.stride(0), c2.stride(1),
        k_per, BN1, SPLIT=SPLIT, HAS_B2={b2 is not None}, TMA=use_tma, FENCE=gdc, BM=BM, BN=BN2, BK=BK2, PAD=PAD,
        COUNTERS=COUNTERS,
        num_warps={down_warps}, num_stages={down_stages}, launch_pdl=gdc)
"""
