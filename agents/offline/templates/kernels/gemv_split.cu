
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
