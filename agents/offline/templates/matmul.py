"""GEMM with an epilogue (bias, activation); attention lives in attention.py.

Reference shape (GEMM): ops {mm|addmm|matmul, t/permute, casts, add, relu|gelu|silu}; inputs a [..., K],
b [N, K] (linear weight) or [K, N], optional bias [N]; output [..., N].
Kernel: tiled tl.dot (WGMMA on Hopper) with fp32 accumulators, grouped program order for L2 reuse, the
epilogue applied before the one store. Launcher: grid = cdiv(M, BM) * cdiv(N, BN).
CUDA C++ (decode shapes only, every workload with M <= SMALL_M and an [N, K] weight): a CTA per output
column (or per slice of a long one) loads its whole share of the weight row at once in 16-byte vectors and
keeps up to 8 rows of fp32 sums (gemv_split); gemv_cols, several warps a column looping over K, is the other
kernel and the fallback for unaligned rows. A GEMV is bound by the weight's bytes, which 128-row tensor-core
tiles waste on an M of 1.
Notes at the bottom.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_ARRIVAL_COUNTERS, CUDA_FILE, TRITON_GDC_ENTRY, TRITON_GDC_PARAM, Binding, Family, Renderer,
                   cuda_module, py_signature, triton_launcher)

_GEMM_OPS = {"mm", "addmm", "matmul", "t", "permute", "transpose", "_to_copy", "add", "relu", "gelu", "silu",
             "view", "_unsafe_view", "expand", "clone", "reshape", "linear", "contiguous"}  # fmt: skip
_ACTS = ("relu", "gelu", "silu")
SMALL_M = 16  # the CUDA template's limit on rows of a (tokens): beyond it, tiles with reuse win


def _max_rows(problem: Problem, a: str) -> int:
    """The most rows of ``a`` (all dims but the last) over the problem's workloads."""
    spec, most = problem.definition.inputs[a], 0
    for w in problem.workloads:
        shape = spec.concrete_shape(problem.definition.resolve_axes(w.axes))
        rows = 1
        for d in shape[:-1]:
            rows *= d
        most = max(most, rows)
    return most


def match_gemm(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not sig.has_any("mm", "addmm") or not sig.only(_GEMM_OPS) or sig.has("bmm"):
        return []
    d = problem.definition
    if len(d.outputs) != 1:
        return []
    out = next(iter(d.outputs.values())).shape or []
    tensors = {n: s.shape for n, s in d.inputs.items() if not s.is_scalar}
    if len(out) < 2 or len(tensors) not in (2, 3) or any(s.is_scalar for s in d.inputs.values()):
        return []
    acts = [a for a in _ACTS if sig.has(a)]
    if len(acts) > 1:
        return []
    consts = {"act": acts[0] if acts else None}
    bias = [n for n, s in tensors.items() if s == [out[-1]]]
    mats = [n for n in tensors if n not in bias[:1]]
    if len(mats) != 2 or len(tensors) - len(mats) != len(bias[:1]):
        return []
    a, b = mats
    if tensors[a][:-1] != out[:-1] or len(tensors[b]) != 2:
        return []
    roles = {"a": a, "b": b, **({"bias": bias[0]} if bias else {})}
    consts["max_m"] = _max_rows(problem, a)
    out_b = []
    if tensors[b][0] == out[-1] and tensors[b][1] == tensors[a][-1]:
        out_b.append(Binding(roles, {**consts, "b_is_nk": True}))
    if tensors[b][1] == out[-1] and tensors[b][0] == tensors[a][-1]:
        out_b.append(Binding(roles, {**consts, "b_is_nk": False}))
    return out_b


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def render_gemm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias = b.roles["a"], b.roles["b"], b.roles.get("bias")
    wt = w if b.consts["b_is_nk"] else f"{w}.t()"
    lin = f"F.linear({a}, {wt}, {bias or 'None'})"
    act = {None: lin, "relu": f"F.relu({lin})", "gelu": f"F.gelu({lin})", "silu": f"F.silu({lin})"}[b.consts["act"]]
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_({act})
"""


BIAS_EPILOGUE = "acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]"


def triton_gemm_kernel(name: str, epilogue: list[str], three_way: bool = False, split_k: bool = False,
                       sum_in_launch: bool = False, tma: bool = False, atomic: str | None = None,
                       zero: bool = False) -> str:
    """A tiled GEMM ``name(a, b, bias, c, M, N, K, strides..., BM, BN, BK, GROUP)``: grouped program order,
    fp32 accumulators ``acc`` [BM, BN] over rows ``rm`` and columns ``rn``, then ``epilogue`` (lines of
    Triton, e.g. ``BIAS_EPILOGUE`` and an activation) before the one store in c's dtype.

    ``three_way``: one launch for three GEMMs of one A (grid axis 1 picks which): after ``scn`` the kernel
    takes the second and third B's and biases as element offsets from the first (``b_off1, b_off2,
    bias_off1, bias_off2``; separate tensors of one dtype and layout) and the output's stride between the
    three results (``scz``).

    ``split_k``: grid axis 1 splits K into slices of ``k_per`` (a multiple of BK); slice s writes its fp32
    partial sums to ``c + s * scs`` (a workspace), which a second kernel adds up (``SPLIT_SUM``). Only for
    linear epilogues, which that kernel applies: an activation of a partial sum is not the activation.

    ``sum_in_launch`` (with ``split_k``): no second kernel. The partial sums go to ``ws_ptr + s * scs``
    ([SPLIT, M, N] fp32) and ``c`` is the output: each program counts itself in on its tile's arrival counter
    (``cnt_ptr + pid``, int32, zero before the launch), and the one that arrives last adds the SPLIT partials
    (read through L2), the bias when ``HAS_BIAS``, stores the tile and sets the counter back to zero.

    ``tma``: ``a_ptr`` and ``b_ptr`` are tensor descriptors (``TMA_DESCRIPTORS``), A [M, K] in blocks [BM, BK]
    and B as stored by a linear layer, [N, K] in blocks [BN, BK]; the copy engine fetches the tiles and fills
    rows and columns past the edges with zeros, so the loop has no masks (``sam``-``sbn`` are unused).

    ``atomic`` (with ``split_k``): no second kernel and no workspace. Each slice adds its partial sums into the
    output ``c`` (zero before the launch) by atomic reductions in c's dtype, slice 0 with the bias when
    ``HAS_BIAS``: ``"ptr"`` by element atomics through pointers, ``"desc"`` by the copy engine's bulk tensor
    reduction of the whole tile, ``c_ptr`` then being a descriptor of c in blocks [BM, BN]. The order of the
    additions varies from run to run.

    ``zero``: the kernel also stores zeros over ``z_ptr[:z_numel]`` (grid-stride, before its K loop): the output
    of an ``atomic`` launch that follows, with no memset of its own."""
    if three_way and tma:
        raise ValueError("a three-way GEMM launch reads through pointers, not tensor descriptors")
    if three_way and split_k:
        raise ValueError("a GEMM launch is either three-way or split over K, not both")
    if sum_in_launch and not split_k:
        raise ValueError("sum_in_launch adds up the slices of a split_k launch")
    if atomic not in (None, "ptr", "desc") or (atomic and (not split_k or sum_in_launch)):
        raise ValueError(f"atomic is 'ptr' or 'desc', for a split_k launch without sum_in_launch, not {atomic!r}")
    lines = "\n    ".join(epilogue)
    pointer_body = """ka = k0 + rk
        av = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        bv = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(av, bv, acc)"""
    tma_body = """av = a_ptr.load([pid_m * BM, k0])
        bv = b_ptr.load([pid_n * BN, k0])
        acc = tl.dot(av, bv.T, acc)"""
    extra, pick, k_range = "", "", "0, K, BK"
    if three_way:
        extra = " b_off1, b_off2, bias_off1, bias_off2, scz,"
        pick = """
    z = tl.program_id(1).to(tl.int64)
    b_ptr += (z == 1).to(tl.int64) * b_off1 + (z == 2).to(tl.int64) * b_off2
    bias_ptr += (z == 1).to(tl.int64) * bias_off1 + (z == 2).to(tl.int64) * bias_off2
    c_ptr += z * scz"""
    if split_k:
        extra = " k_per, scs,"
        pick = """
    s = tl.program_id(1)
    k_lo = s * k_per
    c_ptr += s.to(tl.int64) * scs"""
        k_range = "k_lo, k_lo + k_per, BK"  # the last slice may run past K: its loads are masked
    consts, store = "", f"""tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))"""
    if atomic:
        extra = " k_per,"
        consts = " HAS_BIAS: tl.constexpr,"
        pick = """
    s = tl.program_id(1)
    k_lo = s * k_per"""
        bias = f"""if HAS_BIAS:
        if s == 0:
            {BIAS_EPILOGUE}
    """
        if atomic == "desc":  # the tile's rows and columns past the edges are clipped by the copy engine
            store = bias + "c_ptr.atomic_add([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype))"
        else:
            store = bias + """tl.atomic_add(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
                  mask=(rm[:, None] < M) & (rn[None, :] < N), sem="relaxed")"""
    if sum_in_launch:
        extra = " k_per, scs, ws_ptr, cnt_ptr,"
        consts = " SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr,"
        pick = """
    s = tl.program_id(1)
    k_lo = s * k_per"""
        # the barrier puts every thread's partial sums before the release of the arrival (threadFenceReduction)
        store = f"""mk = (rm[:, None] < M) & (rn[None, :] < N)
    tile = rm[:, None] * N + rn[None, :]
    tl.store(ws_ptr + s.to(tl.int64) * scs + tile, acc, mask=mk)
    tl.debug_barrier()
    arrived = tl.atomic_add(cnt_ptr + pid, 1, sem="acq_rel")
    if arrived == SPLIT - 1:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for t in tl.static_range(SPLIT):
            acc += tl.load(ws_ptr + t * scs + tile, mask=mk, other=0.0, cache_modifier=".cg")
        if HAS_BIAS:
            {BIAS_EPILOGUE}
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mk)
        tl.atomic_xchg(cnt_ptr + pid, 0)"""
    zeros = ""
    if zero:
        extra += " z_ptr, z_numel,"
        consts += " ZB: tl.constexpr,"
        zeros = """
    zr = tl.arange(0, ZB)
    for z0 in range(tl.program_id(0) * ZB, z_numel, tl.num_programs(0) * ZB):
        tl.store(z_ptr + z0 + zr, tl.zeros((ZB,), dtype=z_ptr.dtype.element_ty), mask=z0 + zr < z_numel)"""
    return f"""
@triton.jit
def {name}(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,{extra}
          {consts} BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr, {TRITON_GDC_PARAM}):
    {TRITON_GDC_ENTRY}
    pid = tl.program_id(0){pick}{zeros}
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP * grid_n
    first_m = (pid // width) * GROUP
    rows_here = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % rows_here
    pid_n = (pid % width) // rows_here
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range({k_range}):
        {tma_body if tma else pointer_body}
    {lines}
    {store}
"""


# Small-M GEMMs (a few hundred tokens) leave most SMs idle with 64x128 tiles: the rendered launches narrow
# the column tile, down to 32, until the grid covers the device's SMs (`_fit_bn`). Off CUDA, one "SM".
FIT_TILES = '''

_SM_COUNTS = {}


def _sms(t):
    if t.device.type != "cuda":
        return 1
    i = t.device.index if t.device.index is not None else torch.cuda.current_device()
    if i not in _SM_COUNTS:
        _SM_COUNTS[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return _SM_COUNTS[i]


def _fit_bn(m, n, bm, bn, z, sms):
    while bn > 32 and triton.cdiv(m, bm) * triton.cdiv(n, bn) * z < sms:
        bn //= 2
    return bn


def _fit_split(tiles, k, bk, sms):
    # slices of K (at least 4 BK steps each) until the grid covers the SMs: a small-M GEMM over a long K
    # otherwise runs a few dozen programs through a long serial loop
    split = 1
    while tiles * split < sms and triton.cdiv(k, bk) >= split * 2 * 4 and split < 8:
        split *= 2
    return split
'''


# Host side of ``tma`` GEMMs (``triton_gemm_kernel(..., tma=True)``): descriptors, and whether every operand
# can have one. Rendered files fall back to the pointer kernels where it cannot.
TMA_DESCRIPTORS = '''

try:
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:  # a Triton without host-side descriptors
    _TensorDescriptor = None


def _tma_ready(*ts):
    # the copy engine reads 2-D tensors with unit column stride and 16-byte aligned rows and base, on sm_90
    # and newer. Off CUDA (the interpreter) not for bfloat16: Triton 3.9's interpreter multiplies bfloat16
    # blocks loaded through descriptors wrongly (float32 and float16 are right).
    if _TensorDescriptor is None:
        return False
    for t in ts:
        if t.dim() != 2 or t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
        if t.is_cuda and torch.cuda.get_device_capability(t.device)[0] < 9:
            return False
        if not t.is_cuda and t.dtype == torch.bfloat16:
            return False
    return True


def _desc(t, rows, cols):
    return _TensorDescriptor.from_tensor(t, [rows, cols])


def _jit_launch(kernel):
    # descriptor arguments are not hashable: these launches go through the JIT (a graph replays them)
    return lambda grid, *args, **kwargs: kernel[grid](*args, **kwargs)
'''

# Adds up split_k partial sums [SPLIT, M, N] (fp32, contiguous) into c, with an optional bias: one row per
# program along grid axis 0, column blocks along axis 1.
SPLIT_SUM = f'''
@triton.jit
def _sum_splits(ws_ptr, bias_ptr, c_ptr, N, scs, scm, scn, SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr,
                BLOCK: tl.constexpr, {TRITON_GDC_PARAM}):
    {TRITON_GDC_ENTRY}
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = col < N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(ws_ptr + s * scs + row * N + col, mask=m, other=0.0)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + col, mask=m, other=0.0).to(tl.float32)
    tl.store(c_ptr + row * scm + col * scn, acc.to(c_ptr.dtype.element_ty), mask=m)
'''


def render_gemm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias, y = b.roles["a"], b.roles["b"], b.roles.get("bias"), _out(problem)
    # strides of B as (k, n): an [N, K] weight is read transposed without a copy
    b_strides = f"{w}.stride(1), {w}.stride(0)" if b.consts["b_is_nk"] else f"{w}.stride(0), {w}.stride(1)"
    act = {
        None: "",
        "relu": "acc = tl.maximum(acc, 0.0)",
        "silu": "acc = acc * tl.sigmoid(acc)",
        "gelu": "acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))",
    }[b.consts["act"]]
    epilogue = [line for line in (BIAS_EPILOGUE if bias else "", act) if line]
    return f"""import torch
import triton
import triton.language as tl

{triton_gemm_kernel("_gemm", epilogue)}
{triton_launcher()}
_gemm_launch = _Launcher(_gemm)


{py_signature(problem)}
    a2 = {a}.reshape(-1, {a}.shape[-1])
    c2 = {y}.view(-1, {y}.shape[-1])
    M, K = a2.shape
    N = c2.shape[1]
    if M == 0 or N == 0:
        return
    BM, BN, BK = {p["bm"]}, {p["bn"]}, {p["bk"]}
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _gemm_launch(grid, a2, {w}, {bias or "a2"}, c2, M, N, K, a2.stride(0), a2.stride(1), {b_strides},
                 c2.stride(0), c2.stride(1), BM=BM, BN=BN, BK=BK, GROUP=8,
                num_warps={p["num_warps"]}, num_stages={p["stages"]})
"""


_CUDA_GEMV = r"""
__device__ __forceinline__ uint4 ld_nc_v4(const void* p) {  // read-once weight: no L1 allocation
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
template <int ACT> __device__ __forceinline__ float act_f(float v) {
  if (ACT == 1) return fmaxf(v, 0.f);
  if (ACT == 2) return 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
  if (ACT == 3) return v / (1.f + __expf(-v));
  return v;
}
// y[m, n] = act(sum_k a[m, k] w[n, k] + bias[n]) for rows m0 .. m0 + MAXM of a; KSPLIT warps per column n,
// each over its own slice of K, their sums added through shared memory. Decode GEMVs are bound by reading
// W once: one warp per column left ~4 KB of loads in flight per SM (1.0 TB/s on the H200), so
// the K slices and the unrolled loop below put several times more in flight.
template <typename T, int MAXM, bool VEC, bool HAS_BIAS, int ACT, int KSPLIT>
__global__ void gemv_cols(const T* __restrict__ a, const T* __restrict__ w, const T* __restrict__ bias,
                          T* __restrict__ y, int M, int N, int K) {
  __shared__ float part[32][MAXM];  // one row per warp of the block (at most 1024 threads)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = blockIdx.x * ((blockDim.x >> 5) / KSPLIT) + warp / KSPLIT;
  const int ks = warp % KSPLIT;
  // No early return: every warp reaches the block's barriers; a warp past the last column loads nothing.
  const bool valid = n < N;
  constexpr int E = VEC ? 16 / (int)sizeof(T) : 1;
  const int step = 32 * E;
  const int chunk = ((K + KSPLIT - 1) / KSPLIT + step - 1) / step * step;  // a multiple of one warp's step
  const int k_begin = ks * chunk, k_end = min(K, k_begin + chunk);
  const T* wr = w + (long long)(valid ? n : 0) * K;
  for (int m0 = 0; m0 < M; m0 += MAXM) {
    const int mc = min(MAXM, M - m0);
    float acc[MAXM];
    #pragma unroll
    for (int i = 0; i < MAXM; ++i) acc[i] = 0.f;
    if (valid) {
      if (VEC) {
        #pragma unroll 4
        for (int k = k_begin + lane * E; k < k_end; k += step) {
          const uint4 wv = ld_nc_v4(wr + k);
          const T* we = reinterpret_cast<const T*>(&wv);
          #pragma unroll
          for (int i = 0; i < MAXM; ++i) {
            if (i < mc) {
              const uint4 av = *reinterpret_cast<const uint4*>(a + (long long)(m0 + i) * K + k);
              const T* ae = reinterpret_cast<const T*>(&av);
              #pragma unroll
              for (int e = 0; e < E; ++e) acc[i] += to_f<T>(ae[e]) * to_f<T>(we[e]);
            }
          }
        }
      } else {
        #pragma unroll 4
        for (int k = k_begin + lane; k < k_end; k += 32) {
          const float wv = to_f<T>(wr[k]);
          #pragma unroll
          for (int i = 0; i < MAXM; ++i)
            if (i < mc) acc[i] += to_f<T>(a[(long long)(m0 + i) * K + k]) * wv;
        }
      }
    }
    #pragma unroll
    for (int i = 0; i < MAXM; ++i) acc[i] = warp_sum(acc[i]);
    if (KSPLIT > 1) {
      if (lane == 0) {
        #pragma unroll
        for (int i = 0; i < MAXM; ++i) part[warp][i] = acc[i];
      }
      __syncthreads();
      if (ks == 0 && lane == 0) {
        #pragma unroll
        for (int i = 0; i < MAXM; ++i) {
          float sum = 0.f;
          #pragma unroll
          for (int j = 0; j < KSPLIT; ++j) sum += part[warp + j][i];
          acc[i] = sum;
        }
      }
      __syncthreads();  // the next rows' partial sums reuse `part`
    }
    if (valid && ks == 0 && lane == 0) {
      const float b = HAS_BIAS ? to_f<T>(bias[n]) : 0.f;
      #pragma unroll
      for (int i = 0; i < MAXM; ++i)
        if (i < mc) y[(long long)(m0 + i) * N + n] = from_f<T>(act_f<ACT>(acc[i] + b));
    }
  }
}
// Element e (a constant once unrolled) of a 16-byte vector, by bit operations rather than through its address.
template <typename T> __device__ __forceinline__ float half_bits_f(uint32_t b);
template <> __device__ __forceinline__ float half_bits_f<float>(uint32_t b) { return 0.f; }  // not reached
template <> __device__ __forceinline__ float half_bits_f<__half>(uint32_t b) {
  return __half2float(__ushort_as_half((unsigned short)b));
}
template <> __device__ __forceinline__ float half_bits_f<__nv_bfloat16>(uint32_t b) { return __uint_as_float(b << 16); }
template <typename T> __device__ __forceinline__ float vec_elem(const uint4& v, int e) {
  constexpr int PER_WORD = 4 / (int)sizeof(T);
  const int q = e / PER_WORD;
  const uint32_t u = q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
  if (sizeof(T) == 4) return __uint_as_float(u);
  return half_bits_f<T>((e % PER_WORD) ? u >> 16 : u & 0xffffu);  // element 0 in the low half
}
template <typename T, bool HAS_BIAS, int ACT, int THREADS, int KSPLIT>
void launch_gemv(const T* a, const T* w, const T* bias, T* y, int M, int N, int K, cudaStream_t s) {
  static_assert(KSPLIT >= 1 && KSPLIT <= THREADS / 32 && (THREADS / 32) % KSPLIT == 0,
                "KSPLIT divides the warps of a block");
  const int cols = THREADS / 32 / KSPLIT;
  const unsigned blocks = (N + cols - 1) / cols;
  const bool vec = K % (16 / (int)sizeof(T)) == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w) % 16 == 0;
#define SOLFORGE_GEMV(MAXM, V) \
  gemv_cols<T, MAXM, V, HAS_BIAS, ACT, KSPLIT><<<blocks, THREADS, 0, s>>>(a, w, bias, y, M, N, K)
  if (vec) {
    if (M == 1) SOLFORGE_GEMV(1, true); else if (M <= 4) SOLFORGE_GEMV(4, true); else SOLFORGE_GEMV(8, true);
  } else {
    if (M == 1) SOLFORGE_GEMV(1, false); else if (M <= 4) SOLFORGE_GEMV(4, false); else SOLFORGE_GEMV(8, false);
  }
#undef SOLFORGE_GEMV
}
"""

# The CTA-wide sum of split GEMV (a string of its own: the host emulation test supplies its own version).
_CUDA_CTA_SUM = r"""
// Thread 0 gets the CTA's totals of acc[0 .. R): each warp sums its lanes, thread 0 adds the warps' sums.
template <int R, int WARPS>
__device__ __forceinline__ void cta_sum_rows(float (&acc)[R], float (*red)[R]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  #pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = warp_sum(acc[i]);
  if (lane == 0) {
    #pragma unroll
    for (int i = 0; i < R; ++i) red[warp][i] = acc[i];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    #pragma unroll
    for (int i = 0; i < R; ++i) {
      float t = 0.f;
      #pragma unroll
      for (int j = 0; j < WARPS; ++j) t += red[j][i];
      acc[i] = t;
    }
  }
}
"""

# Split GEMV: one CTA per (column n, K slice s, block of MAXM rows of a). Each lane loads its VPL 16-byte
# weight vectors at once, with no loop, so every load of the CTA is in flight together, and the CTA retires.
# Plain read kernels of that shape read 16 MB in 6.5 us under the judge's dirty L2 flush (bench/memory_floor.py,
# H200), where gemv_cols, which walks a column in batches of four loads a lane, took 7.8 us. The launcher
# makes a slice a whole column where that fits in 8 vectors a lane. Longer rows are split, and their slices
# are added in the same launch: thread 0 of each CTA stores its partial sums and counts the CTA in; the
# column's last CTA to arrive adds the partials in slice order (the same sum whichever arrives last), writes y
# and leaves the counter at zero.
_CUDA_GEMV_SPLIT_KERNEL = r"""
template <typename T, int THREADS, int MAXM, int VPL, bool HAS_BIAS, int ACT>
__global__ void __launch_bounds__(THREADS) gemv_split(const T* __restrict__ a, const T* __restrict__ w,
                                                      const T* __restrict__ bias, T* __restrict__ y,
                                                      float* __restrict__ ws, unsigned* __restrict__ arrivals,
                                                      int M, int N, int K, int slices) {
  constexpr int E = 16 / (int)sizeof(T), WARPS = THREADS / 32, STRIDE = THREADS * E;
  __shared__ float red[WARPS][MAXM];
  const int n = (int)(blockIdx.x / (unsigned)slices), s = (int)(blockIdx.x % (unsigned)slices);
  const int m0 = (int)blockIdx.y * MAXM, mc = min(MAXM, M - m0);
  const int k0 = s * STRIDE * VPL + (int)threadIdx.x * E;
  const T* wr = w + (long long)n * K;
  uint4 wv[VPL];
  #pragma unroll
  for (int v = 0; v < VPL; ++v)
    wv[v] = k0 + v * STRIDE < K ? ld_nc_v4(wr + k0 + v * STRIDE) : make_uint4(0u, 0u, 0u, 0u);
  float acc[MAXM];
  #pragma unroll
  for (int i = 0; i < MAXM; ++i) acc[i] = 0.f;
  #pragma unroll
  for (int v = 0; v < VPL; ++v) {
    const int k = k0 + v * STRIDE;
    if (k < K) {
      #pragma unroll
      for (int i = 0; i < MAXM; ++i) {
        if (i < mc) {
          const uint4 av = *reinterpret_cast<const uint4*>(a + (long long)(m0 + i) * K + k);
          #pragma unroll
          for (int e = 0; e < E; ++e) acc[i] += vec_elem<T>(av, e) * vec_elem<T>(wv[v], e);
        }
      }
    }
  }
  cta_sum_rows<MAXM, WARPS>(acc, red);
  if (threadIdx.x != 0) return;
  const float b = HAS_BIAS ? to_f<T>(bias[n]) : 0.f;
  if (slices == 1) {
    #pragma unroll
    for (int i = 0; i < MAXM; ++i)
      if (i < mc) y[(long long)(m0 + i) * N + n] = from_f<T>(act_f<ACT>(acc[i] + b));
    return;
  }
  #pragma unroll
  for (int i = 0; i < MAXM; ++i)
    if (i < mc) ws[((long long)s * M + m0 + i) * N + n] = acc[i];
  // the threadFenceReduction pattern: the partials are visible device-wide before the CTA counts in
  __threadfence();
  const long long counter = (long long)blockIdx.y * N + n;
  if (atomicAdd(&arrivals[counter], 1u) != (unsigned)slices - 1) return;
  __threadfence();
  #pragma unroll
  for (int i = 0; i < MAXM; ++i) {
    if (i < mc) {
      float sum = 0.f;
      for (int j = 0; j < slices; ++j) sum += __ldcg(&ws[((long long)j * M + m0 + i) * N + n]);
      y[(long long)(m0 + i) * N + n] = from_f<T>(act_f<ACT>(sum + b));
    }
  }
  arrivals[counter] = 0u;  // no other CTA of this column touches it again in this launch
}
"""

_CUDA_GEMV_SPLIT_HOST = r"""
template <typename T, int THREADS, int MAXM, int VPL, bool HAS_BIAS, int ACT>
static void launch_split_rows(const at::Tensor& like, const T* a, const T* w, const T* bias, T* y, int M, int N,
                              int K, cudaStream_t s) {
  constexpr int CHUNK = THREADS * (16 / (int)sizeof(T)) * VPL;  // K elements a CTA covers
  const long long slices = (K + CHUNK - 1) / CHUNK, blocks = (M + MAXM - 1) / MAXM;
  TORCH_CHECK(N * slices < (1LL << 31) && blocks < 65536, "split GEMV: grid too large (", N * slices, " x ",
              blocks, " CTAs)");
  at::Tensor part;  // freed on return: the caching allocator hands it out again only to later work on s
  float* ws = nullptr;
  unsigned* arrivals = nullptr;
  if (slices > 1) {
    part = like.new_empty({slices * M * N}, like.options().dtype(at::kFloat));
    ws = reinterpret_cast<float*>(part.data_ptr());
    arrivals = arrival_counters(like, blocks * N, "split GEMV");  // one per (block of rows, column)
  }
  gemv_split<T, THREADS, MAXM, VPL, HAS_BIAS, ACT><<<dim3((unsigned)(N * slices), (unsigned)blocks), THREADS, 0, s>>>(
      a, w, bias, y, ws, arrivals, M, N, K, (int)slices);
}
template <typename T, int THREADS, int VPL, bool HAS_BIAS, int ACT>
static void launch_split_vpl(const at::Tensor& like, const T* a, const T* w, const T* bias, T* y, int M, int N, int K,
                             cudaStream_t s) {
  if (M == 1) launch_split_rows<T, THREADS, 1, VPL, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
  else if (M <= 4) launch_split_rows<T, THREADS, 4, VPL, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
  else launch_split_rows<T, THREADS, 8, VPL, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
}
// 16-byte rows (K a multiple of a vector, a and w aligned) take the split kernel with the fewest vectors a lane
// (1, 2, 4 or 8) that cover a whole row of W: one CTA a column, no partial sums, which measured fastest
// (H200: 7.4 us on k8192 at 256 threads x 4 vectors, against 9.3 in 4 KB slices). Rows longer than
// THREADS x 8 vectors are split into slices of that size. Other rows take gemv_cols, one column a CTA.
template <typename T, bool HAS_BIAS, int ACT, int THREADS>
void launch_gemv_split(const at::Tensor& like, const T* a, const T* w, const T* bias, T* y, int M, int N, int K,
                       cudaStream_t s) {
  constexpr int E = 16 / (int)sizeof(T);
  const bool vec = K % E == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (!vec) return launch_gemv<T, HAS_BIAS, ACT, THREADS, THREADS / 32>(a, w, bias, y, M, N, K, s);
  const int per_lane = (K / E + THREADS - 1) / THREADS;  // vectors a lane for one CTA a column
  if (per_lane <= 1) launch_split_vpl<T, THREADS, 1, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
  else if (per_lane <= 2) launch_split_vpl<T, THREADS, 2, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
  else if (per_lane <= 4) launch_split_vpl<T, THREADS, 4, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
  else launch_split_vpl<T, THREADS, 8, HAS_BIAS, ACT>(like, a, w, bias, y, M, N, K, s);
}
"""

_ACT_CODE = {None: 0, "relu": 1, "gelu": 2, "silu": 3}


def render_gemm_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> dict[str, str]:
    a, w, bias, y = b.roles["a"], b.roles["b"], b.roles.get("bias"), _out(problem)
    has_bias = "true" if bias else "false"
    bias_ptr = f"reinterpret_cast<const scalar_t*>({bias}.data_ptr())" if bias else "nullptr"
    same = f" && {bias}.scalar_type() == {a}.scalar_type()" if bias else ""
    ptrs = (f"reinterpret_cast<const scalar_t*>({a}.data_ptr()), reinterpret_cast<const scalar_t*>({w}.data_ptr()),\n"
            f"        {bias_ptr}, reinterpret_cast<scalar_t*>({y}.data_ptr()), (int)M, (int)N, (int)K, stream")
    epilogue = f"{has_bias}, {_ACT_CODE[b.consts['act']]}"
    if p["kernel"] == "split":
        kernels = _CUDA_GEMV + _CUDA_CTA_SUM + _CUDA_GEMV_SPLIT_KERNEL + CUDA_ARRIVAL_COUNTERS
        kernels += _CUDA_GEMV_SPLIT_HOST
        launch = f"launch_gemv_split<scalar_t, {epilogue}, {p['threads']}>({a}, {ptrs});"
    else:
        kernels = _CUDA_GEMV
        launch = f"launch_gemv<scalar_t, {epilogue}, {p['threads']}, {p['ksplit']}>({ptrs});"
    body = f"""  const long long K = {a}.size(-1), N = {y}.size(-1);
  const long long M = K == 0 ? 0 : {a}.numel() / K;
  if (M == 0 || N == 0) return;
  TORCH_CHECK({w}.size(0) == N && {w}.size(1) == K, "weight shape does not match [N, K]");
  TORCH_CHECK({w}.scalar_type() == {a}.scalar_type() && {y}.scalar_type() == {a}.scalar_type(){same},
              "mixed dtypes are not handled by this template");
  auto stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({a}.scalar_type(), scalar_t, {{
    {launch}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, kernels, body)


def _decode_shaped(b: Binding) -> bool:
    return bool(b.consts["b_is_nk"]) and b.consts.get("max_m", SMALL_M + 1) <= SMALL_M


GEMM = Family(
    name="gemm",
    candidates=match_gemm,
    renderers=(
        Renderer("pytorch", False, {}, render_gemm_pytorch),
        Renderer(
            "triton", True,
            {"bm": (128, 64), "bn": (128, 256), "bk": (64,), "num_warps": (8,), "stages": (3, 4)},
            render_gemm_triton,
        ),  # fmt: skip
        # Measured on one H200, in one call: the split kernel with a whole column a CTA led on all three
        # bundled linears: k4096 11.1 us at 256 threads (gemv_cols 12.4), k8192 7.4 (7.9), linear_bias 3.3 at
        # 512 threads (3.8). gemv_cols stays in the grid behind it. Dropped after measurement: a
        # streaming kernel of persistent CTAs (ahead only on k4096, by 4%) and an L2 evict-first
        # weight stream (no gain).
        Renderer("cuda_cpp", True,
                 ({"kernel": ("split",), "threads": (256, 128, 512)},
                  {"kernel": ("cols",), "threads": (128, 256), "ksplit": (4, 8)}),
                 render_gemm_cuda, file=CUDA_FILE, accepts=_decode_shaped,
                 keep=lambda p: p["kernel"] == "split" or p["ksplit"] * 32 <= p["threads"]),
    ),
)

# Notes: the GEMM template handles K not a multiple of BK by masking; for bf16 inputs tl.dot accumulates in
# fp32 like cuBLAS.
