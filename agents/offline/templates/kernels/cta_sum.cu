
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
