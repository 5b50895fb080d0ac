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

from .base import TRITON_ARRIVAL_COUNTERS, TRITON_GDC_READY, Binding, kernel_source
from .triton_gemm import FIT_TILES, TMA_DESCRIPTORS
from .mlp_fused import UP_TILE, run_prologue, tile_plan

KERNELS = UP_TILE + "\n" + kernel_source("mlp_overlap.py")


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
{tile_plan(bm, bn1, bk1, bn2, bk2, split)}
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
