
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
