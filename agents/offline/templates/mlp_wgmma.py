"""The MLP block in CUDA C++ for Hopper (sm_90a): two launches of one warp-specialized, weight-stationary WGMMA
GEMM whose loads go through TMA, optionally replayed as one CUDA graph per call.

A CTA holds 64 weight rows on wgmma's M side (one consumer warpgroup issuing ``wgmma.mma_async`` m64nTk16 from
128-byte-swizzled shared memory) against a tile of T tokens on its N side, fed by a producer warp whose one
thread issues the TMA loads of a ``stages``-deep ring. At a few hundred tokens each weight byte then leaves L2
once per token tile. The ``cluster`` CTAs of consecutive weight tiles need the same token tile: each loads a
share of its rows and multicasts them, and a stage is refilled only when every CTA of the cluster has released
it (each consumer warp arrives on the stage's ``empty`` barrier in every peer CTA).

Up launch: h = act(x·W1ᵀ + b1), rounded once to the input dtype. Down launch: the hidden width split in
``split`` slices (grid z); with one slice the CTA stores out = h·W2ᵀ + b2, with more each slice adds its bf16
partial into the output (slice 0 adds b2), the output zeroed by the up launch. Each tile goes out through
shared memory: with ``tma_out`` staged by stmatrix in the output map's swizzled box and sent by one TMA store
(or one bulk bf16 add reduction), else as 16-byte rows (or bf16x2 vector reductions). Needs bf16 operands,
contiguous rows 16-byte aligned, K and the hidden width multiples of 64; ``run`` checks and says which. (A token-major kernel, 64-token tiles
against the weights on wgmma's N side, was slower at every point measured against this one and is gone.)
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .base import CUDA_CLUSTERS, Binding, cuda_module, kernel_source
from .elementwise import ACTS as ELEMENTWISE_ACTS

CUDA_ACTS: dict[str, str] = {name: exprs[2] for name, exprs in ELEMENTWISE_ACTS.items()} | {"relu": "fmaxf(v, 0.f)"}
# the epilogue's forms: exact GELU through the kernel's branch-free gelu_erf, the rest as the elementwise kernels
ACT_EXPRS: dict[str, str] = CUDA_ACTS | {"gelu": "gelu_erf(v)"}
BK = 64  # one K step: 64 bf16 = the 128-byte swizzle span


def wgmma_call(bn: int) -> str:
    """``wgmma_m64k16<BN>``: one m64nBNk16 bf16 WGMMA into fp32 accumulators, both operands in shared memory."""
    regs = bn // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    binds = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return f"""
__device__ __forceinline__ void wgmma_m64k16_{bn}(float* d, uint64_t da, uint64_t db) {{
  asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{regs + 2}, 0;\\n"
               " wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.bf16.bf16 {{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 0;\\n}}\\n"
               : {binds}
               : "l"(da), "l"(db), "r"(1));
}}
"""


KERNEL = kernel_source("mlp_wgmma.cu")


def _const(problem: Problem, dim: Any) -> int | None:
    if isinstance(dim, int):
        return dim
    axis = problem.definition.axes.get(dim)
    return getattr(axis, "value", None) if axis is not None and axis.type == "const" else None


def widths(problem: Problem, roles: Mapping[str, str]) -> tuple[int, int, int] | None:
    """(K, hidden, out width) when the kernels can run the block: every tensor bf16, the widths constant, K and
    the hidden width multiples of 64 (whole K steps), the widths multiples of 8 (16-byte row pieces); else
    None."""
    d = problem.definition
    if any(s.dtype != "bfloat16" for s in (*d.inputs.values(), *d.outputs.values())):
        return None
    hidden, k = (_const(problem, v) for v in d.inputs[roles["w1"]].shape)
    out = _const(problem, d.inputs[roles["w2"]].shape[0])
    if None in (hidden, k, out) or k % BK or hidden % BK or out % 8:
        return None
    return k, hidden, out


# Measured on the H200 (bench/template_sweep.py, judged by bench/buffers_ab.py), correct at every point tried and
# on B = 1, 7, 64. Token-major (removed): 20.3-22 us against the Triton file's 14.0. Weight-stationary: 19.4 us,
# 16.3 with a graph per call, 14.6-14.9 with CTA-only barriers and pdl; gelu_erf and tma_out then cut the up tile's epilogue from ~3.7 to ~1.5 us: 12.0 us in-process (11.8 with 72-token up tiles)
# against Triton's 13.9 in the same run; judged 11.95 us, 1.46x T_b. Planned ahead of the Triton file, which
# the search still judges (each group's first variant).
PLANNED = True


def accepts(b: Binding) -> bool:
    """Planned for a binding whose block the kernels can run (``widths``), once the kernels are measured."""
    return PLANNED and bool(b.consts.get("wgmma"))


SMEM_LIMIT = 227 * 1024  # an sm_90 CTA's dynamic shared memory


def token_box(tokens: int, cluster: int) -> int:
    """Rows each cluster CTA loads (and multicasts) of a ``tokens``-row A tile: whole 8-row atoms, so the
    cluster's boxes may run past the tile (the extra rows are loaded, never used)."""
    return -(-tokens // (8 * cluster)) * 8


def ws_stages(tokens: int, cluster: int, stages: int) -> int:
    """``stages`` cut to what fits an SM's shared memory at this tile."""
    stage = 64 * BK * 2 + token_box(tokens, cluster) * cluster * 128
    while stages > 2 and stages * (stage + 16) + 1024 > SMEM_LIMIT:
        stages -= 1
    return stages


def kernels_source(b: Binding, tiles: set[int]) -> str:
    """The kernels with a WGMMA call for each N of ``tiles`` and the binding's activation."""
    tiles_sorted = sorted(tiles)
    calls = "".join(wgmma_call(n) for n in tiles_sorted)
    dispatch = "".join(
        f"template <> __device__ __forceinline__ void wgmma_k16<{n}>(float* d, uint64_t da, uint64_t db) "
        f"{{ wgmma_m64k16_{n}(d, da, db); }}\n"
        for n in tiles_sorted)  # fmt: skip
    return (KERNEL.replace("WGMMA_CALLS", calls).replace("WGMMA_DISPATCH", dispatch)
            .replace("ACT_EXPR", ACT_EXPRS[b.consts["act"]]))  # fmt: skip


def render_cuda_wgmma(problem: Problem, b: Binding, p: Mapping[str, Any]) -> dict[str, str]:
    """The weight-stationary pair of launches (``gemm_ws``): 64 weight rows per CTA against ``tokens`` rows
    (up) and ``down_tokens`` rows in ``split`` K slices (down), the activation tile multicast per cluster."""
    r = b.roles
    x, w1, w2, b1, b2 = r["x"], r["w1"], r["w2"], r.get("b1"), r.get("b2")
    out = next(iter(problem.definition.outputs))
    shape = widths(problem, r)
    if shape is None:
        raise ValueError(f"mlp wgmma: {problem.name} is not a bf16 block with K and hidden width in multiples of 64, widths of 8")
    _, hidden, width = shape
    # the largest cluster up to the asked one that divides both launches' 64-row weight tiles (the kernel rounds
    # a grid up to whole clusters, so any size is correct; a divisor wastes no CTA)
    tiles = (-(-hidden // 64), -(-width // 64))
    cm = max(c for c in range(1, int(p["cluster"]) + 1) if tiles[0] % c == 0 and tiles[1] % c == 0)
    t_up, t_down = int(p["tokens"]), int(p["down_tokens"])
    if t_up % 8 or t_down % 8 or not (8 <= min(t_up, t_down) and max(t_up, t_down) <= 256):
        raise ValueError(f"mlp wgmma: token tiles must be multiples of 8 up to 256, got {t_up} and {t_down}")
    s_up, s_down = ws_stages(t_up, cm, int(p["stages"])), ws_stages(t_down, cm, int(p["down_stages"]))
    inflight, pdl = int(p.get("inflight", 1)), "true" if p.get("pdl") else "false"
    split = min(int(p["split"]), hidden // BK)
    down_epi = 1 if split > 1 else 2
    graph = bool(p.get("graph"))
    operands = [f"{n}.data_ptr()" for n in (x, w1, w2, *([b1] if b1 else []), *([b2] if b2 else []))] + ["c.data_ptr()"]
    key = ("std::vector<long long> key = {" + ", ".join(f"reinterpret_cast<long long>({o})" for o in operands)
           + ", M, K, H, N, static_cast<long long>(a.get_device())};\n"
           # a graph reads the addresses it was recorded with: not when x's rows are a copy made for this call
           f"  const bool graphed = a.data_ptr() == {x}.data_ptr();\n  if (graphed && replay_graph(key, stream)) return;"
           if graph else "")  # fmt: skip
    rounded, tma = ("true" if p.get(k) else "false" for k in ("act_rounded", "tma_out"))
    up_args = f"{t_up}, {token_box(t_up, cm)}, {s_up}, {cm}, 0, {inflight}, {pdl}, {rounded}, {tma}"
    down_args = f"{t_down}, {token_box(t_down, cm)}, {s_down}, {cm}, {down_epi}, {inflight}, {pdl}, false, {tma}"
    out_maps = (f"""
    const CUtensorMap map_h_out = tile_map(h, M, H, {t_up}, "the hidden activations"), map_out = tile_map(c, M, N, {t_down}, "{out}");"""
                if tma == "true" else "")  # fmt: skip
    body = f"""  const at::Tensor a = {x}.reshape({{-1, {x}.size(-1)}});
  at::Tensor c = {out}.view({{-1, {out}.size(-1)}});
  TORCH_CHECK(c.is_contiguous() && c.scalar_type() == at::kBFloat16, "mlp wgmma: {out} must be contiguous bfloat16");
  const long long M = a.size(0), K = a.size(1), H = {w1}.size(0), N = {w2}.size(0);
  if (M == 0) return;
  TORCH_CHECK(K % 64 == 0 && H % 64 == 0, "mlp wgmma: K ", K, " and hidden width ", H, " must be multiples of 64");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.get_device()).stream();
  {"const at::Tensor bias1 = " + b1 + ";" if b1 else ""}
  {"const at::Tensor bias2 = " + b2 + ";" if b2 else ""}
  {key}
  at::Tensor h = a.new_empty({{M, H}});
  auto enqueue = [&](cudaStream_t stream) {{
    // every map before the first launch, so nothing but the launch sits between the two kernels
    const CUtensorMap map_w1 = tile_map({w1}, H, K, 64, "{w1}"), map_x = tile_map(a, M, K, {token_box(t_up, cm)}, "{x}");
    const CUtensorMap map_w2 = tile_map({w2}, N, H, 64, "{w2}"), map_h = tile_map(h, M, H, {token_box(t_down, cm)}, "the hidden activations");{out_maps}
    launch_ws<{up_args}>(map_w1, map_x, {"&map_h_out" if out_maps else "nullptr"}, M, H, static_cast<int>(K / 64), 1, {"&bias1" if b1 else "nullptr"}, h, {"&c" if split > 1 else "nullptr"}, stream);
    launch_ws<{down_args}>(map_w2, map_h, {"&map_out" if out_maps else "nullptr"}, M, N, static_cast<int>(H / 64), {split}, {"&bias2" if b2 else "nullptr"}, c, nullptr, stream);
  }};
  {"if (graphed) run_and_record(std::move(key), h, stream, enqueue); else enqueue(stream);" if graph else "enqueue(stream);"}"""
    return cuda_module(problem, CUDA_CLUSTERS + kernels_source(b, {t_up, t_down}), body)


WGMMA_GRID = {"tokens": (72, 104, 128), "down_tokens": (200, 104), "stages": (6, 12), "down_stages": (6, 4),
              "cluster": (1, 4, 2), "split": (8, 4), "inflight": (2, 1), "pdl": (True, False), "graph": (True,),
              "tma_out": (True, False)}  # fmt: skip
