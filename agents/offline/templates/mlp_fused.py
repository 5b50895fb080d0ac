"""The MLP block as one persistent Triton launch (``fused``): both GEMMs, the activation and the split-K sum.

Why: at a few hundred tokens each of the three launches of the unfused file (up, split down, sum) is bound by
its CTAs' short serial K loops and its ramp and tail, not by bandwidth (H200: up 7.2 us, down 5.8-6.8,
sum 1.8-2.5, for a 2.7 us speed-of-light). One launch lets the down projection's slices start as soon as the
hidden columns they read are written, overlaps them with the rest of the up projection, and (``prefetch``)
pulls W2 into L2 while the up projection runs; W2 does not depend on the hidden activations.

Work: P programs (``per_sm`` per SM, never more than fit at once, ``_resident``) take items ``pid, pid + P, ...`` from one list: first the up
projection's tiles [BM, BN1] of h = act(x·W1ᵀ + b1) (stored in the input dtype, as the reference rounds it),
then the down projection's items, (row tile, column tile [BM, BN2], K slice s of ``k_per`` hidden columns),
slice-major so that the first slices' items come first. Each up tile counts itself in on its (row tile,
slice) counter after its store; a down item waits on the counter of its own (row tile, slice) until every
up tile of that slice is in, then runs its K loop, stores fp32 partial sums to ``ws[s]`` and counts itself in
on its output tile's counter; the last slice of a tile to arrive adds the SPLIT partials in slice order (the
sum is deterministic) with b2 and stores the output. The last program to finish sets every counter back to
zero for the next call.

The waits need every program resident at once, hence the clamp (from the compiled kernel's shared memory,
registers and warps). Every program runs all of its up items before any of its down items, so each wait is on work that a
running program has already been handed. ``PHASE`` splits the list into two launches (1: up items, 2: down
items): the interpreter runs programs one after another, where a wait on a later program's tile would never
end, and ``one_launch`` False measures the same kernel as two launches on the GPU.

The hidden activations are written by ordinary stores and read back through pointers with ``.cg`` loads: a
tensor-descriptor (TMA) read of data another CTA wrote with generic stores would need a proxy fence that
Triton does not expose. x, W1 and W2 are read-only and go through descriptors under ``tma``.

Measured on the H200, each phase also timed alone: correct, and slower than
the unfused file (25.8-48 us against 16.8 in-process). Both phases' buffers share one CTA's shared memory, so
one CTA fits an SM, and it moves the operands from L2 at ~1.5-2 TB/s where the unfused launches, 2-3 CTAs per
SM, reach ~7.5: the time is bytes in flight, not launches. Not in the planned grid.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .base import TRITON_ARRIVAL_COUNTERS, Binding, py_signature
from .matmul import FIT_TILES, TMA_DESCRIPTORS

# One ``cp.async.bulk.prefetch`` per row of W2 that an item reads, its ``k_per`` columns in one request (16-byte
# aligned rows and base: only where the descriptors could be made, ``use_tma``).
_PREFETCH_ASM = 'tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;", "=r,l,r", ' \
                "[rows, nbytes], dtype=tl.int32, is_pure=False, pack=1)"

KERNEL = """
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
            rm = pid_m * BM + tl.arange(0, BM)
            ri = pid_i * BN1 + tl.arange(0, BN1)
            rk = tl.arange(0, BK1)
            acc = tl.zeros((BM, BN1), dtype=tl.float32)
            for k0 in range(0, K, BK1):
                if TMA:
                    av = x_ptr.load([pid_m * BM, k0])
                    bv = w1_ptr.load([pid_i * BN1, k0])
                    acc = tl.dot(av, bv.T, acc)
                else:
                    ka = k0 + rk
                    av = tl.load(x_ptr + rm[:, None] * sxm + ka[None, :] * sxk,
                                 mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
                    bv = tl.load(w1_ptr + ka[:, None] * sw1k + ri[None, :] * sw1i,
                                 mask=(ka[:, None] < K) & (ri[None, :] < I), other=0.0)
                    acc = tl.dot(av, bv, acc)
            if HAS_B1:
                acc += tl.load(b1_ptr + ri, mask=ri < I, other=0.0).to(tl.float32)[None, :]
            v = acc
            acc = {act}
            tl.store(h_ptr + rm[:, None] * I + ri[None, :], acc.to(h_ptr.dtype.element_ty),
                     mask=(rm[:, None] < M) & (ri[None, :] < I))
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
"""

# How many CTAs of a compiled kernel one SM holds at once: its shared memory (plus the 1 KiB the driver
# reserves per CTA), registers and warps against the SM's.
_RESIDENT = """


def _resident(kernel, warps, device):
    if hasattr(kernel, "_init_handles"):  # Triton loads the binary (and reads its registers) lazily
        kernel._init_handles()
    props = torch.cuda.get_device_properties(device)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472)
    regs = getattr(props, "regs_per_multiprocessor", 65536)
    threads = getattr(props, "max_threads_per_multi_processor", 2048)
    by_smem = smem // (kernel.metadata.shared + 1024)
    by_regs = regs // max(kernel.n_regs * 32 * warps, 1)
    fits = min(by_smem, by_regs, threads // (32 * warps), 32)
    if fits < 1:
        raise RuntimeError(f"_mlp_fused: one CTA needs {kernel.metadata.shared} B of shared memory and "
                           f"{kernel.n_regs} registers a thread, more than an SM has")
    return fits
"""


def run_prologue(problem: Problem, b: Binding) -> str:
    """``run``'s signature and first lines in both MLP files: x and y as 2-D views ``a2`` and ``c2``, sizes M,
    K, hidden, N, the empty cases answered, and the hidden activations ``h`` allocated."""
    r, y = b.roles, next(iter(problem.definition.outputs))
    x, w1, b2 = r["x"], r["w1"], r.get("b2")
    return f"""{py_signature(problem)}
    a2 = {x}.reshape(-1, {x}.shape[-1])
    c2 = {y}.view(-1, {y}.shape[-1])
    M, K = a2.shape
    hidden, N = {w1}.shape[0], c2.shape[1]
    if M == 0 or N == 0:
        return
    if hidden == 0 or K == 0:
        {"c2.copy_(" + b2 + ".expand_as(c2))" if b2 else "c2.zero_()"}
        return
    h = torch.empty((M, hidden), dtype={x}.dtype, device={x}.device)"""


def render_fused(problem: Problem, b: Binding, p: Mapping[str, Any], act_expr: str | None) -> str:
    """The fused file: ``run`` launches ``_mlp_fused`` once on the GPU (twice, by phase, off it or when
    ``one_launch`` is False). ``act_expr``: the activation as a Triton expression of fp32 ``v``, or None."""
    r = b.roles
    x, w1, w2, b1, b2 = r["x"], r["w1"], r["w2"], r.get("b1"), r.get("b2")
    bm, bn1, bk1, bn2, bk2 = (int(p[k]) for k in ("bm", "bn", "bk", "down_bn", "down_bk"))
    split, tma, prefetch = int(p["split"]), bool(p.get("tma")), bool(p.get("prefetch"))
    kernel = KERNEL.replace("{act}", act_expr or "v").replace("{prefetch}", _PREFETCH_ASM if prefetch else "pass")
    return f"""import torch
import triton
import triton.language as tl

{kernel}
{FIT_TILES}{TMA_DESCRIPTORS if tma else ""}{TRITON_ARRIVAL_COUNTERS}{_RESIDENT}


{run_prologue(problem, b)}
    BM, BN1, BK1, BN2, BK2, SPLIT = {bm}, {bn1}, {bk1}, {bn2}, {bk2}, {split}
    # slices of whole up tiles and whole down K steps (both powers of two: the larger is a multiple)
    step = max(BN1, BK2)
    k_per = triton.cdiv(triton.cdiv(hidden, step), SPLIT) * step
    grid_m = triton.cdiv(M, BM)
    items = grid_m * (triton.cdiv(hidden, BN1) + triton.cdiv(N, BN2) * SPLIT)
    ws = torch.empty((SPLIT, M, N), dtype=torch.float32, device={x}.device)
    counters = _arrival_counters(c2, grid_m * SPLIT + grid_m * triton.cdiv(N, BN2) + 1)
    {f"use_tma = _tma_ready(a2, {w1}, {w2})" if tma else "use_tma = False"}
    if use_tma:
        xo, w1o, w2o = _desc(a2, BM, BK1), _desc({w1}, BN1, BK1), _desc({w2}, BN2, BK2)
    else:
        xo, w1o, w2o = a2, {w1}, {w2}
    args = (xo, w1o, {b1 or "a2"}, h, w2o, {w2}, {b2 or "a2"}, c2, ws, counters, M, K, hidden, N, a2.stride(0),
            a2.stride(1), {w1}.stride(0), {w1}.stride(1), {w2}.stride(0), {w2}.stride(1), c2.stride(0), c2.stride(1),
            k_per)
    consts = dict(SPLIT=SPLIT, HAS_B1={b1 is not None}, HAS_B2={b2 is not None}, TMA=use_tma,
                  PREFETCH={prefetch} and use_tma and a2.is_cuda, BM=BM, BN1=BN1, BK1=BK1, BN2=BN2, BK2=BK2,
                  UP_COUNTERS=triton.next_power_of_2(grid_m * SPLIT),
                  num_warps={int(p["num_warps"])}, num_stages={int(p["stages"])})
    if a2.is_cuda and {bool(p.get("one_launch", True))}:
        # up to PER_SM programs per SM, never more than fit at once: every program must be resident (the waits)
        programs = min(items, _sms(a2) * {int(p.get("per_sm", 1))})
        compiled = _mlp_fused.warmup(*args, programs, PHASE=0, grid=(programs,), **consts)
        programs = min(programs, _sms(a2) * _resident(compiled, {int(p["num_warps"])}, a2.device))
        _mlp_fused[(programs,)](*args, programs, PHASE=0, **consts)
        return
    # two launches, by phase (off CUDA three programs, one after another)
    programs = min(items, _sms(a2) * {int(p.get("per_sm", 1))} if a2.is_cuda else 3)
    for phase in (1, 2):
        _mlp_fused[(programs,)](*args, programs, PHASE=phase, **consts)
"""
