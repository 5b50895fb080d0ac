
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
  if (ACT == 4) return tanhf(v);
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
