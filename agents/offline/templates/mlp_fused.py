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

from .base import TRITON_ARRIVAL_COUNTERS, Binding, kernel_source, py_signature
from .triton_gemm import FIT_TILES, TMA_DESCRIPTORS

# One ``cp.async.bulk.prefetch`` per row of W2 that an item reads, its ``k_per`` columns in one request (16-byte
# aligned rows and base: only where the descriptors could be made, ``use_tma``).
_PREFETCH_ASM = 'tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;", "=r,l,r", ' \
                "[rows, nbytes], dtype=tl.int32, is_pure=False, pack=1)"

KERNEL = kernel_source("mlp_fused.py")
# The up projection's tile, shared by the fused and the overlapping file (placeholder ``{act}``).
UP_TILE = kernel_source("mlp_up_tile.py")

# How many CTAs of a compiled kernel one SM holds at once: its shared memory (plus the 1 KiB the driver
# reserves per CTA), registers and warps against the SM's.
_RESIDENT = kernel_source("resident_ctas.py")


def tile_plan(bm: int, bn1: int, bk1: int, bn2: int, bk2: int, split: int) -> str:
    """``run``'s lines after the prologue in both MLP files: the tiles, and the hidden width's slices
    ``k_per`` (whole up tiles and whole down K steps) over the ``grid_m`` row blocks."""
    return f"""    BM, BN1, BK1, BN2, BK2, SPLIT = {bm}, {bn1}, {bk1}, {bn2}, {bk2}, {split}
    # slices of whole up tiles and whole down K steps (both powers of two: the larger is a multiple)
    step = max(BN1, BK2)
    k_per = triton.cdiv(triton.cdiv(hidden, step), SPLIT) * step
    grid_m = triton.cdiv(M, BM)"""


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
    kernel = f"{UP_TILE}\n{KERNEL}".replace("{act}", act_expr or "v")
    kernel = kernel.replace("{prefetch}", _PREFETCH_ASM if prefetch else "pass")
    return f"""import torch
import triton
import triton.language as tl

{kernel}
{FIT_TILES}{TMA_DESCRIPTORS if tma else ""}{TRITON_ARRIVAL_COUNTERS}{_RESIDENT}


{run_prologue(problem, b)}
{tile_plan(bm, bn1, bk1, bn2, bk2, split)}
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
