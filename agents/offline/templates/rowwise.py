"""Softmax and LayerNorm over the last dim (the other row-wise families; RMSNorm has its own file).

Reference shape: softmax — ops {_softmax, casts} or decomposed {amax|max, sub, exp, sum, div|reciprocal·mul,
casts}, one tensor input shaped like the output. Long softmax rows (> 8192 columns in Triton, > 32 × threads
in CUDA) are not held in one CTA: Triton loops over the row; CUDA holds the row in the registers of several
CTAs (``resident``: a cluster a row, or a cooperative grid) or splits it over CTAs in two passes.
LayerNorm — ops {native_layer_norm | var_mean/sub/mean...}, x shaped like the output, optional 1-D weight
and bias, eps a scalar input or a literal.
Kernel: one program / CTA per row, fp32 math, the row held in registers. Launcher: grid = rows.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (
    CUDA_CLUSTERS, CUDA_FILE, Binding, Family, Renderer, cuda_module, eps_literal, py_signature, triton_launcher,
)


def _single_output_like(problem: Problem) -> tuple[str, list] | None:
    d = problem.definition
    if len(d.outputs) != 1:
        return None
    out = next(iter(d.outputs.values()))
    xs = [n for n, s in d.inputs.items() if not s.is_scalar and s.shape == out.shape]
    if len(xs) != 1 or not out.shape:
        return None
    return xs[0], out.shape


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


# ---------------------------------------------------------------------------------------------- softmax

_SOFTMAX_CASTS = {"_to_copy", "clone", "contiguous", "copy_", "alias", "detach", "view", "expand"}
# The decomposed spelling: x - amax(x) (or max), exp, sum, divide (or multiply by the reciprocal).
_SOFTMAX_DECOMPOSED = {"amax", "max", "sub", "exp", "sum", "div", "mul", "reciprocal"}


def match_softmax(problem: Problem, sig: OpSignature) -> list[Binding]:
    fused = sig.has("_softmax") and sig.only({"_softmax", *_SOFTMAX_CASTS})
    decomposed = (sig.has("exp", "sum") and sig.has_any("div", "reciprocal")
                  and sig.only(_SOFTMAX_DECOMPOSED | _SOFTMAX_CASTS))  # fmt: skip
    if not (fused or decomposed):
        return []
    found = _single_output_like(problem)
    if found is None or len([s for s in problem.definition.inputs.values() if not s.is_scalar]) != 1:
        return []
    return [Binding({"x": found[0]})]


def render_softmax_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""import torch

{py_signature(problem)}
    {_out(problem)}.copy_(torch.softmax({x}.float(), dim=-1))
"""


# Rows up to SOFTMAX_TRITON_BLOCK columns are held in registers by one program; wider rows are looped over in
# SOFTMAX_TRITON_LOOP_BLOCK-wide chunks (online max / sum of exponentials, then a second pass writing).
SOFTMAX_TRITON_BLOCK = 8192
SOFTMAX_TRITON_LOOP_BLOCK = 4096


def render_softmax_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x = b.roles["x"]
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=m, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _softmax_row_loop(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # Long rows: per-lane online (max, sum of exp(x - max)) over BLOCK-wide chunks, then a second loop
    # writing exp(x - max) / sum.
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n_cols
    yr = y_ptr + row * n_cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        v = tl.load(xr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        mn = tl.maximum(m, v)
        live = mn > -float("inf")  # a lane that has seen only -inf keeps s = 0 (no exp(-inf - -inf))
        s = tl.where(live, s * tl.exp(m - mn) + tl.exp(v - mn), 0.0)
        m = mn
    row_max = tl.max(m, axis=0)
    scale = tl.where(m > -float("inf"), tl.exp(m - row_max), 0.0)
    inv = 1.0 / tl.sum(s * scale, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        v = tl.load(xr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(yr + cols, (tl.exp(v - row_max) * inv).to(y_ptr.dtype.element_ty), mask=mask)

{triton_launcher()}
_row_launch, _loop_launch = _Launcher(_softmax_row), _Launcher(_softmax_row_loop)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols if n_cols else 0
    if rows == 0:
        return
    if n_cols <= {SOFTMAX_TRITON_BLOCK}:
        _row_launch((rows,), {x}, {_out(problem)}, n_cols, BLOCK=triton.next_power_of_2(n_cols),
                    num_warps={p["num_warps"]})
    else:
        _loop_launch((rows,), {x}, {_out(problem)}, n_cols, BLOCK={SOFTMAX_TRITON_LOOP_BLOCK},
                     num_warps={p["num_warps"]})
"""


_SOFTMAX_CUDA = r"""
// Short rows (<= 32 x threads): one CTA per row, the row held in registers.
template <typename T, int MAX_PER_THREAD>
__global__ void __launch_bounds__(1024) softmax_rows(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
  __shared__ float smem[32];
  const long long row = blockIdx.x;
  float v[MAX_PER_THREAD];
  float mx = -INFINITY;
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    v[i] = c < n_cols ? to_f<T>(x[row * n_cols + c]) : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = block_reduce<true>(mx, smem);
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) { v[i] = __expf(v[i] - mx); s += v[i]; }
  const float inv = 1.f / block_reduce<false>(s, smem);
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    if (c < n_cols) y[row * n_cols + c] = from_f<T>(v[i] * inv);
  }
}

// Long rows: online softmax statistics (m, s) = (max, sum of exp(x - m)) of a span [begin, end) of a row,
// 16-byte loads when the row and the span are aligned (VEC: begin, end multiples of 16 / sizeof(T)).
__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;  // both empty (or all -inf): keep s = 0, no exp(-inf - -inf)
  s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
  m = mn;
}

// Every thread gets the block's combined (m, s).
__device__ void block_ms(float& m, float& s) {
  __shared__ float sm[32], ss[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    ms_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  if (lane == 0) { sm[warp] = m; ss[warp] = s; }
  __syncthreads();
  if (warp == 0) {
    m = lane < nwarps ? sm[lane] : -INFINITY;
    s = lane < nwarps ? ss[lane] : 0.f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      ms_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) { sm[0] = m; ss[0] = s; }
  }
  __syncthreads();
  m = sm[0];
  s = ss[0];
}

template <typename T, bool VEC>
__device__ __forceinline__ void span_stats(const T* __restrict__ xr, int begin, int end, float& m, float& s) {
  m = -INFINITY;
  s = 0.f;
  if (VEC) {
    constexpr int V = 16 / sizeof(T);
    const uint4* p = reinterpret_cast<const uint4*>(xr + begin);
    const int nv = (end - begin) / V;
    #pragma unroll 4
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
      const uint4 raw = __ldg(p + i);
      const T* e = reinterpret_cast<const T*>(&raw);
      float f[V];
      float lm = -INFINITY;
      #pragma unroll
      for (int j = 0; j < V; ++j) { f[j] = to_f<T>(e[j]); lm = fmaxf(lm, f[j]); }
      const float mn = fmaxf(m, lm);
      if (mn == -INFINITY) continue;
      float a = s * __expf(m - mn);
      #pragma unroll
      for (int j = 0; j < V; ++j) a += __expf(f[j] - mn);
      s = a;
      m = mn;
    }
  } else {
    for (int c = begin + threadIdx.x; c < end; c += blockDim.x) ms_merge(m, s, to_f<T>(xr[c]), 1.f);
  }
}

template <typename T, bool VEC>
__device__ __forceinline__ void span_write(const T* __restrict__ xr, T* __restrict__ yr, int begin, int end,
                                           float m, float inv) {
  if (VEC) {
    constexpr int V = 16 / sizeof(T);
    const uint4* p = reinterpret_cast<const uint4*>(xr + begin);
    uint4* q = reinterpret_cast<uint4*>(yr + begin);
    const int nv = (end - begin) / V;
    #pragma unroll 4
    for (int i = threadIdx.x; i < nv; i += blockDim.x) {
      const uint4 raw = __ldg(p + i);
      const T* e = reinterpret_cast<const T*>(&raw);
      uint4 out;
      T* o = reinterpret_cast<T*>(&out);
      #pragma unroll
      for (int j = 0; j < V; ++j) o[j] = from_f<T>(__expf(to_f<T>(e[j]) - m) * inv);
      __stcs(q + i, out);  // streaming store: the output is not read again here
    }
  } else {
    for (int c = begin + threadIdx.x; c < end; c += blockDim.x) yr[c] = from_f<T>(__expf(to_f<T>(xr[c]) - m) * inv);
  }
}

// Many long rows: one CTA per row, two sweeps (statistics, then outputs; the second read mostly hits L2).
template <typename T, bool VEC>
__global__ void softmax_row_loop(const T* __restrict__ x, T* __restrict__ y, int n_cols) {
  const long long row = blockIdx.x;
  float m, s;
  span_stats<T, VEC>(x + row * n_cols, 0, n_cols, m, s);
  block_ms(m, s);
  span_write<T, VEC>(x + row * n_cols, y + row * n_cols, 0, n_cols, m, 1.f / s);
}

// Few long rows: each row split over `chunks` CTAs. Pass 1: each CTA writes its chunk's (m, s) to ws.
template <typename T, bool VEC>
__device__ __forceinline__ void chunk_stats_pass(const T* __restrict__ x, float2* __restrict__ ws, int n_cols,
                                                 int chunk, int chunks) {
  const long long row = blockIdx.x / chunks;
  const int c = blockIdx.x % chunks;
  const int begin = c * chunk, end = min(n_cols, begin + chunk);
  float m, s;
  span_stats<T, VEC>(x + row * n_cols, begin, end, m, s);
  block_ms(m, s);
  if (threadIdx.x == 0) ws[blockIdx.x] = make_float2(m, s);
}

// Pass 2: each CTA combines its row's partials, then writes its chunk's outputs exp(x - m) / s. The partials
// are read from L2 (__ldcg): in the fused kernel other CTAs wrote them during the same launch.
template <typename T, bool VEC>
__device__ __forceinline__ void chunk_write_pass(const T* __restrict__ x, const float2* __restrict__ ws,
                                                 T* __restrict__ y, int n_cols, int chunk, int chunks) {
  const long long row = blockIdx.x / chunks;
  const int c = blockIdx.x % chunks;
  const int begin = c * chunk, end = min(n_cols, begin + chunk);
  float m = -INFINITY, s = 0.f;
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
    const float2 part = __ldcg(ws + row * chunks + i);
    ms_merge(m, s, part.x, part.y);
  }
  block_ms(m, s);
  span_write<T, VEC>(x + row * n_cols, y + row * n_cols, begin, end, m, 1.f / s);
}

template <typename T, bool VEC>
__global__ void softmax_chunk_stats(const T* __restrict__ x, float2* __restrict__ ws, int n_cols, int chunk,
                                    int chunks) {
  chunk_stats_pass<T, VEC>(x, ws, n_cols, chunk, chunks);
}

template <typename T, bool VEC>
__global__ void softmax_chunk_write(const T* __restrict__ x, const float2* __restrict__ ws, T* __restrict__ y,
                                    int n_cols, int chunk, int chunks) {
  chunk_write_pass<T, VEC>(x, ws, y, n_cols, chunk, chunks);
}

// One launch for both passes (FUSED): a grid-wide barrier between them, for grids the driver confirms are
// co-resident (cooperative launch; on refusal, the two launches above). The barrier's counters live in the
// module and return to their start after each barrier, so consecutive launches of any grid size reuse them.
// The split softmax's second launch cost ~4 µs between the two kernels under the CUPTI window (H200:
// 12.3 µs against Inductor's 9.3 µs for one 128k-wide row).
__device__ unsigned int g_softmax_arrived = 0;
__device__ unsigned int g_softmax_generation = 0;

__device__ __forceinline__ void grid_barrier() {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned int* generation = &g_softmax_generation;
    const unsigned int seen = *generation;  // read before arriving: the last arrival bumps it after
    __threadfence();
    const unsigned int total = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&g_softmax_arrived, 1u) == total - 1) {
      atomicExch(&g_softmax_arrived, 0u);
      __threadfence();
      atomicAdd(&g_softmax_generation, 1u);
    } else {
      while (*generation == seen) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

template <typename T, bool VEC>
__global__ void softmax_chunk_fused(const T* __restrict__ x, float2* __restrict__ ws, T* __restrict__ y,
                                    int n_cols, int chunk, int chunks) {
  chunk_stats_pass<T, VEC>(x, ws, n_cols, chunk, chunks);
  grid_barrier();  // begins with __syncthreads: block_ms's shared slots are free for the second pass
  chunk_write_pass<T, VEC>(x, ws, y, n_cols, chunk, chunks);
}

// A row held in registers over `parts` CTAs (RESIDENT): each CTA reads its slice of the row once, 16 bytes a
// load, all of them requested before any is used; the CTAs exchange their (m, s) and write from registers, so
// x is read once (softmax_chunk_fused reads it twice). The exchange: CLUSTER, the row's CTAs are one thread-
// block cluster and read each other's (m, s) from distributed shared memory after a cluster barrier
// (dsmem_f2); otherwise a cooperative grid, partials in `ws` and grid_barrier. Why: one 128k-wide fp32 row
// read 6.1 us in softmax_chunk_fused (H200), 2.4 us being a copy of its bytes
// (bench/memory_floor.py); a 16-CTA cluster reads it in 4.8 us, the grid in 6.0.
template <typename T, int NV, bool CLUSTER>
__global__ void __launch_bounds__(1024) softmax_resident(const T* __restrict__ x, float2* __restrict__ ws,
                                                         T* __restrict__ y, int n_cols, int parts, int slice) {
  constexpr int V = 16 / sizeof(T);
  const long long row = blockIdx.x / parts;
  const int v0 = (blockIdx.x % parts) * slice, v1 = min(n_cols / V, v0 + slice);
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * n_cols);
  uint4 xv[NV];
  #pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = v0 + threadIdx.x + j * blockDim.x;
    if (i < v1) xv[j] = __ldg(xr + i);
  }
  float m = -INFINITY, s = 0.f;
  #pragma unroll
  for (int j = 0; j < NV; ++j) {
    if (v0 + threadIdx.x + j * blockDim.x < v1) {
      const T* e = reinterpret_cast<const T*>(&xv[j]);
      #pragma unroll
      for (int k = 0; k < V; ++k) m = fmaxf(m, to_f<T>(e[k]));
    }
  }
  if (m != -INFINITY) {
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
      if (v0 + threadIdx.x + j * blockDim.x < v1) {
        const T* e = reinterpret_cast<const T*>(&xv[j]);
        #pragma unroll
        for (int k = 0; k < V; ++k) s += __expf(to_f<T>(e[k]) - m);
      }
    }
  }
  block_ms(m, s);
  if (CLUSTER) {
    __shared__ float2 mine, row_ms;
    if (threadIdx.x == 0) mine = make_float2(m, s);
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (threadIdx.x < 32) {  // lane r reads rank r; the same shuffle tree in every CTA: the same (m, s)
      float pm = -INFINITY, ps = 0.f;
      if ((int)threadIdx.x < parts) {
        const float2 o = dsmem_f2(&mine, threadIdx.x);
        pm = o.x;
        ps = o.y;
      }
      #pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        ms_merge(pm, ps, __shfl_xor_sync(0xffffffffu, pm, o), __shfl_xor_sync(0xffffffffu, ps, o));
      if (threadIdx.x == 0) row_ms = make_float2(pm, ps);
    }
    // peers read: a CTA may leave once every CTA has arrived here (the wait is at the end)
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    __syncthreads();
    m = row_ms.x;
    s = row_ms.y;
  } else {
    if (threadIdx.x == 0) ws[blockIdx.x] = make_float2(m, s);
    grid_barrier();
    m = -INFINITY;
    s = 0.f;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) {
      const float2 o = __ldcg(ws + row * parts + i);
      ms_merge(m, s, o.x, o.y);
    }
    block_ms(m, s);
  }
  const float inv = 1.f / s;
  uint4* yr = reinterpret_cast<uint4*>(y + row * n_cols);
  #pragma unroll
  for (int j = 0; j < NV; ++j) {
    const int i = v0 + threadIdx.x + j * blockDim.x;
    if (i < v1) {
      const T* e = reinterpret_cast<const T*>(&xv[j]);
      uint4 out;
      T* o = reinterpret_cast<T*>(&out);
      #pragma unroll
      for (int k = 0; k < V; ++k) o[k] = from_f<T>(__expf(to_f<T>(e[k]) - m) * inv);
      __stcs(yr + i, out);
    }
  }
  if (CLUSTER) asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

template <typename T, int NV, bool CLUSTER>
static bool launch_resident(long long rows, int parts, int slice, int threads, const T* x, float2* ws, T* y,
                            int n_cols, cudaStream_t stream) {
  auto kernel = softmax_resident<T, NV, CLUSTER>;
  const dim3 grid((unsigned)(rows * parts)), block(threads);
  cudaError_t err;
  if (CLUSTER) {
    err = launch_clusters(kernel, grid, block, (unsigned)parts, stream, x, ws, y, n_cols, parts, slice);
  } else {
    void* args[] = {(void*)&x, (void*)&ws, (void*)&y, (void*)&n_cols, (void*)&parts, (void*)&slice};
    err = cudaLaunchCooperativeKernel((const void*)kernel, grid, block, args, 0, stream);
  }
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();  // refused (cluster size, co-residency): the caller takes another path
  return false;
}

// The resident path, or false where it does not apply: rows not 16-byte aligned, a slice over 8 vectors a
// thread, a launch refused. `parts` CTAs a row (a cluster), or for the grid (parts <= 0) the SMs shared out
// among the rows, no CTA left without a vector.
template <typename T>
static bool softmax_resident_row(const at::Tensor& xt, const T* x, T* y, long long rows, int n_cols, int threads,
                                 int parts, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  if (n_cols % V != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0)
    return false;
  const int nvec = n_cols / V;
  const bool cluster = parts > 0;
  if (!cluster) {
    const long long share = sm_count() / rows;
    parts = (int)(share < 1 ? 1 : share);
    const int most = (nvec + threads - 1) / threads;
    parts = parts < most ? parts : most;
  }
  const int slice = (nvec + parts - 1) / parts;
  const int nv = (slice + threads - 1) / threads;
  float2* ws = nullptr;
  at::Tensor ws_t;
  if (!cluster) {
    ws_t = xt.new_empty({rows * parts * 2}, xt.options().dtype(at::kFloat));
    ws = reinterpret_cast<float2*>(ws_t.data_ptr());
  }
#define SOFTMAX_RESIDENT(NV_)                                                                                   \
  return cluster ? launch_resident<T, NV_, true>(rows, parts, slice, threads, x, ws, y, n_cols, stream)          \
                 : launch_resident<T, NV_, false>(rows, parts, slice, threads, x, ws, y, n_cols, stream)
  if (nv <= 1) SOFTMAX_RESIDENT(1);
  if (nv <= 2) SOFTMAX_RESIDENT(2);
  if (nv <= 4) SOFTMAX_RESIDENT(4);
  if (nv <= 8) SOFTMAX_RESIDENT(8);
#undef SOFTMAX_RESIDENT
  return false;
}

// Long rows: CTAs per row so that the grid is ~2 waves of SMs when rows are few; at least
// MIN_PER_THREAD elements per thread per CTA and at most MAX_CHUNKS partials per row. 1 = one CTA per row.
static int softmax_chunks(long long rows, int n_cols, int threads) {
  constexpr int MAX_CHUNKS = 256, MIN_PER_THREAD = 4;
  const long long target = 2LL * sm_count();
  if (rows >= target) return 1;
  long long chunks = (target + rows - 1) / rows;
  const long long by_size = (n_cols + (long long)threads * MIN_PER_THREAD - 1) / ((long long)threads * MIN_PER_THREAD);
  chunks = chunks < by_size ? chunks : by_size;
  chunks = chunks < MAX_CHUNKS ? chunks : MAX_CHUNKS;
  return chunks > 1 ? (int)chunks : 1;
}

template <typename T, bool VEC>
static void softmax_long(const at::Tensor& xt, const T* x, T* y, long long rows, int n_cols, int threads,
                         bool fused, cudaStream_t stream) {
  constexpr int V = VEC ? 16 / sizeof(T) : 1;
  int chunks = softmax_chunks(rows, n_cols, threads);
  if (chunks == 1) {
    softmax_row_loop<T, VEC><<<rows, threads, 0, stream>>>(x, y, n_cols);
    return;
  }
  int chunk = (n_cols + chunks - 1) / chunks;
  chunk = (chunk + V - 1) / V * V;  // chunk starts stay 16-byte aligned
  chunks = (n_cols + chunk - 1) / chunk;
  at::Tensor ws = xt.new_empty({rows * chunks * 2}, xt.options().dtype(at::kFloat));
  float2* wp = reinterpret_cast<float2*>(ws.data_ptr());
  if (fused) {
    void* args[] = {(void*)&x, (void*)&wp, (void*)&y, (void*)&n_cols, (void*)&chunk, (void*)&chunks};
    const cudaError_t err = cudaLaunchCooperativeKernel((const void*)softmax_chunk_fused<T, VEC>,
                                                        dim3((unsigned)(rows * chunks)), dim3(threads), args, 0, stream);
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();  // not co-resident (or no cooperative launch): the two launches below
  }
  softmax_chunk_stats<T, VEC><<<rows * chunks, threads, 0, stream>>>(x, wp, n_cols, chunk, chunks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  softmax_chunk_write<T, VEC><<<rows * chunks, threads, 0, stream>>>(x, wp, y, n_cols, chunk, chunks);
}
"""


def render_softmax_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, y, t = b.roles["x"], _out(problem), p["threads"]
    resident = p.get("resident")
    if resident not in (None, "cluster", "grid"):
        raise ValueError(f"softmax resident: {resident!r} (cluster, grid or None)")
    # a resident variant whose launch is refused falls back to the faster two-pass form (one cooperative launch)
    fused = "true" if p.get("fused", resident is not None) else "false"
    parts = int(p.get("parts", 0)) if resident == "cluster" else 0
    if resident == "cluster" and not 2 <= parts <= 16:
        raise ValueError(f"softmax parts: {parts} CTAs a cluster (2-16)")
    first = (f"if (softmax_resident_row<scalar_t>({x}, xp, yp, rows, n_cols, {t}, {parts}, stream)) {{}}\n      else "
             if resident else "")
    body = f"""  if ({x}.numel() == 0) return;
  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int per_thread = (n_cols + {t} - 1) / {t};
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    auto xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    auto yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    if (per_thread <= 4) softmax_rows<scalar_t, 4><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else if (per_thread <= 8) softmax_rows<scalar_t, 8><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else if (per_thread <= 32) softmax_rows<scalar_t, 32><<<rows, {t}, 0, stream>>>(xp, yp, n_cols);
    else {{
      constexpr int V = 16 / sizeof(scalar_t);
      const bool vec = n_cols % V == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0
                       && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
      {first}if (vec) softmax_long<scalar_t, true>({x}, xp, yp, rows, n_cols, {t}, {fused}, stream);
      else softmax_long<scalar_t, false>({x}, xp, yp, rows, n_cols, {t}, {fused}, stream);
    }}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, CUDA_CLUSTERS + _SOFTMAX_CUDA, body)


SOFTMAX = Family(
    name="softmax",
    candidates=match_softmax,
    renderers=(
        Renderer("pytorch", False, {}, render_softmax_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_softmax_triton),
        # the row resident in registers first: a cluster a row (one 128k fp32 row, H200: 16 CTAs of
        # 512 threads 4.9 us, of 1024 5.1, 8 CTAs 5.8-6.0; each slice brought in by cp.async.bulk instead: 5.0,
        # and 11% slower at 333 rows), then a cooperative grid (5.8); then the two-pass kernels (fused: 6.1)
        Renderer("cuda_cpp", True,
                 ({"threads": (512, 1024), "resident": ("cluster",), "parts": (16, 8)},
                  {"threads": (256, 128), "resident": ("grid",)},
                  {"threads": (512, 256, 1024), "fused": (True, False)}),
                 render_softmax_cuda, file=CUDA_FILE),
    ),
)

# -------------------------------------------------------------------------------------------- layernorm


# The ops of a LayerNorm spelled out (mean, centre, mean of squares, rsqrt, affine, casts): an RMSNorm has
# no ``sub`` and is left to its own family; the probe tells the rest apart (e.g. a missing centring).
_LN_DECOMPOSED_OPS = {
    "_to_copy", "clone", "contiguous", "copy_", "alias", "detach", "view", "unsqueeze", "expand",
    "mean", "sum", "sub", "mul", "pow", "square", "div", "add", "rsqrt", "sqrt", "reciprocal", "var", "var_mean",
}  # fmt: skip
_BIAS_NAMES = ("bias", "beta", "shift")


def _layernorm_like(sig: OpSignature) -> bool:
    if sig.has_any("mm", "addmm", "bmm", "_softmax"):
        return False
    if sig.has("native_layer_norm") or (sig.has_any("var_mean", "var") and sig.has("sub")):
        return True
    return (
        sig.has("sub") and sig.has_any("mean", "sum") and sig.has_any("rsqrt", "sqrt") and sig.has_any("mul", "pow")
        and sig.only(_LN_DECOMPOSED_OPS)
    )  # fmt: skip


def match_layernorm(problem: Problem, sig: OpSignature) -> list[Binding]:
    """x, optional 1-D weight and bias over the last dim, eps; with two vectors both role orders (the one
    whose name reads as a bias, if any, first as the bias), with one both weight and bias: the probe keeps
    what the reference computes."""
    if not _layernorm_like(sig):
        return []
    found = _single_output_like(problem)
    if found is None:
        return []
    x, shape = found
    d = problem.definition
    vecs = [n for n, s in d.inputs.items() if not s.is_scalar and n != x and s.shape == [shape[-1]]]
    others = [n for n, s in d.inputs.items() if not s.is_scalar and n not in (x, *vecs)]
    if others or len(vecs) > 2:
        return []
    vecs.sort(key=lambda n: any(k in n.lower() for k in _BIAS_NAMES))  # stable: a bias-like name last
    scalars = [n for n, s in d.inputs.items() if s.is_scalar]
    base: dict[str, str] = {"x": x}
    consts: dict[str, Any] = {}
    if len(scalars) == 1:
        base["eps"] = scalars[0]
    elif not scalars:
        consts["eps"] = eps_literal(d.reference) or 1e-5
    else:
        return []
    if len(vecs) == 2:
        affine = [{"weight": vecs[0], "bias": vecs[1]}, {"weight": vecs[1], "bias": vecs[0]}]
    elif vecs:
        affine = [{"weight": vecs[0]}, {"bias": vecs[0]}]
    else:
        affine = [{}]
    return [Binding({**base, **a}, consts) for a in affine]


def _eps(b: Binding) -> str:
    return b.roles.get("eps") or repr(b.consts["eps"])


def render_layernorm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    wf = f"{w}.float()" if w else "None"
    bf = f"{bias}.float()" if bias else "None"
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_(F.layer_norm({x}.float(), ({x}.shape[-1],), {wf}, {bf}, {_eps(b)}))
"""


def render_layernorm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias = b.roles["x"], b.roles.get("weight"), b.roles.get("bias")
    # weight and bias loaded beside x, before the reductions (after them, one DRAM round trip more per row)
    loads = "\n    ".join(
        [f"{v} = tl.load({ptr} + cols, mask=m, other=0.0).to(tl.float32)" for v, ptr, on in
         (("wv", "w_ptr", w), ("bv", "b_ptr", bias)) if on]
    )  # fmt: skip
    w_line = "n = n * wv" if w else ""
    b_line = "n = n + bv" if bias else ""
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    xv = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    {loads}
    mean = tl.sum(xv, axis=0) / n_cols
    xc = tl.where(m, xv - mean, 0.0)
    n = xc * tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    {w_line}
    {b_line}
    tl.store(y_ptr + row * n_cols + cols, n.to(y_ptr.dtype.element_ty), mask=m)

{triton_launcher()}
_layernorm_launch = _Launcher(_layernorm_row)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols
    if rows == 0:
        return
    _layernorm_launch((rows,), {x}, {w or x}, {bias or x}, {_out(problem)}, n_cols, float({_eps(b)}),
                      BLOCK=triton.next_power_of_2(n_cols), num_warps={p["num_warps"]})
"""


_LAYERNORM_CUDA = r"""
// Elements [c, c + VEC) of a row as fp32: one 16-byte load when VEC elements are 16 bytes (the launcher
// checked n_cols % VEC == 0 and 16-byte alignment), else VEC scalar loads; zeros past the row's end.
template <typename T, int VEC>
__device__ __forceinline__ void ln_load(const T* __restrict__ p, int c, int n_cols, float (&out)[VEC]) {
  if constexpr (VEC * sizeof(T) == 16) {
    if (c < n_cols) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p + c);
      const T* e = reinterpret_cast<const T*>(&raw);
      #pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] = to_f<T>(e[j]);
    } else {
      #pragma unroll
      for (int j = 0; j < VEC; ++j) out[j] = 0.f;
    }
  } else {
    #pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = c + j < n_cols ? to_f<T>(p[c + j]) : 0.f;
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void ln_store(T* __restrict__ p, int c, int n_cols, const float (&v)[VEC]) {
  if constexpr (VEC * sizeof(T) == 16) {
    if (c < n_cols) {
      uint4 raw;
      T* e = reinterpret_cast<T*>(&raw);
      #pragma unroll
      for (int j = 0; j < VEC; ++j) e[j] = from_f<T>(v[j]);
      *reinterpret_cast<uint4*>(p + c) = raw;
    }
  } else {
    #pragma unroll
    for (int j = 0; j < VEC; ++j) if (c + j < n_cols) p[c + j] = from_f<T>(v[j]);
  }
}

// One CTA per row, the row held in registers: thread t owns the chunks of VEC contiguous elements starting
// at (t + i * blockDim.x) * VEC, i < NCHUNK. fp32 math; two block reductions, the mean and then the mean
// of the squared centred values (as the reference computes the variance, no E[x^2] - mean^2). The launch
// bound caps registers at 64 so that 1024 threads launch (the NCHUNK = 32 fallback needs ~81 unbounded).
template <typename T, int VEC, int NCHUNK, bool HAS_W, bool HAS_B>
__global__ void __launch_bounds__(1024)
layernorm_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
               int n_cols, float eps) {
  __shared__ float smem[32];
  const long long row = blockIdx.x;
  const T* xr = x + row * n_cols;
  T* yr = y + row * n_cols;
  float v[NCHUNK][VEC];
  // Weight and bias read beside x, before the reductions (after them, a second DRAM round trip per row),
  // when a thread holds at most 8 elements of the row (the 64-register bound leaves room for that).
  constexpr bool PRE = NCHUNK * VEC <= 8;
  float wpre[PRE && HAS_W ? NCHUNK : 1][VEC], bpre[PRE && HAS_B ? NCHUNK : 1][VEC];
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < NCHUNK; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * VEC;
    ln_load<T, VEC>(xr, c, n_cols, v[i]);
    if constexpr (PRE && HAS_W) ln_load<T, VEC>(w, c, n_cols, wpre[i]);
    if constexpr (PRE && HAS_B) ln_load<T, VEC>(b, c, n_cols, bpre[i]);
    #pragma unroll
    for (int j = 0; j < VEC; ++j) s += v[i][j];
  }
  const float mean = block_reduce<false>(s, smem) / n_cols;
  float ss = 0.f;
  #pragma unroll
  for (int i = 0; i < NCHUNK; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * VEC;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) {
      v[i][j] = c + j < n_cols ? v[i][j] - mean : 0.f;
      ss += v[i][j] * v[i][j];
    }
  }
  const float rstd = rsqrtf(block_reduce<false>(ss, smem) / n_cols + eps);
  #pragma unroll
  for (int i = 0; i < NCHUNK; ++i) {
    const int c = (threadIdx.x + i * blockDim.x) * VEC;
    if (c >= n_cols) continue;
    float o[VEC], wv[VEC], bv[VEC];
    if constexpr (HAS_W && !PRE) ln_load<T, VEC>(w, c, n_cols, wv);
    if constexpr (HAS_B && !PRE) ln_load<T, VEC>(b, c, n_cols, bv);
    #pragma unroll
    for (int j = 0; j < VEC; ++j) {
      o[j] = v[i][j] * rstd;
      if constexpr (HAS_W) o[j] = o[j] * (PRE ? wpre[PRE && HAS_W ? i : 0][j] : wv[j]);
      if constexpr (HAS_B) o[j] = o[j] + (PRE ? bpre[PRE && HAS_B ? i : 0][j] : bv[j]);
    }
    ln_store<T, VEC>(yr, c, n_cols, o);
  }
}

__host__ inline bool ln_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
"""


def render_layernorm_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    x, w, bias, y, t = b.roles["x"], b.roles.get("weight"), b.roles.get("bias"), _out(problem), p["threads"]
    flags = f"{'true' if w else 'false'}, {'true' if bias else 'false'}"

    def launch(vec: str, chunks: int) -> str:
        return (f"layernorm_rows<scalar_t, {vec}, {chunks}, {flags}><<<rows, {t}, 0, stream>>>"
                f"(xp, wp, bp, yp, n_cols, (float){_eps(b)})")  # fmt: skip

    def ptr(name: str | None) -> str:
        return f"reinterpret_cast<const scalar_t*>({name}.data_ptr())" if name else "nullptr"

    same_dtype = "".join(
        f'\n  TORCH_CHECK({n}.scalar_type() == {x}.scalar_type(), "{n}: dtype differs from {x}");'
        for n in (w, bias, y) if n
    )  # fmt: skip
    body = f"""  const int n_cols = {x}.size(-1);
  const long long rows = {x}.numel() / n_cols;
  if (rows == 0) return;{same_dtype}
  auto stream = c10::cuda::getCurrentCUDAStream();
  DISPATCH_FLOAT({x}.scalar_type(), scalar_t, {{
    constexpr int VEC = 16 / sizeof(scalar_t);
    const scalar_t* xp = reinterpret_cast<const scalar_t*>({x}.data_ptr());
    const scalar_t* wp = {ptr(w)};
    const scalar_t* bp = {ptr(bias)};
    scalar_t* yp = reinterpret_cast<scalar_t*>({y}.data_ptr());
    const bool vec = n_cols % VEC == 0 && ln_aligned16(xp) && ln_aligned16(wp) && ln_aligned16(bp) && ln_aligned16(yp);
    const int chunks = (n_cols / VEC + {t} - 1) / {t};
    const int per_thread = (n_cols + {t} - 1) / {t};
    if (vec && chunks <= 1) {launch("VEC", 1)};
    else if (vec && chunks <= 2) {launch("VEC", 2)};
    else if (vec && chunks <= 4) {launch("VEC", 4)};
    else if (per_thread <= 4) {launch("1", 4)};
    else {{
      TORCH_CHECK(per_thread <= 32, "row too long for this template: ", n_cols);
      {launch("1", 32)};
    }}
  }});
  C10_CUDA_KERNEL_LAUNCH_CHECK();"""
    return cuda_module(problem, _LAYERNORM_CUDA, body)


LAYERNORM = Family(
    name="layernorm",
    candidates=match_layernorm,
    renderers=(
        Renderer("pytorch", False, {}, render_layernorm_pytorch),
        Renderer("triton", True, {"num_warps": (4, 8, 16)}, render_layernorm_triton),
        # 128 threads first: one 16-byte load per thread for H = 1024 in bf16 (the common row lengths).
        Renderer("cuda_cpp", True, {"threads": (128, 256, 512, 1024)}, render_layernorm_cuda, file=CUDA_FILE),
    ),
)

# Notes: softmax is over the last dim only (a reference softmaxing another dim fails the judge and the
# agent moves on). The CUDA softmax uses __expf (fast exp), well within bf16 tolerance.
