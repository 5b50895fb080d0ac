
// One CTA per row; the row is read once into registers (up to MAX_PER_THREAD elements per thread).
template <typename T, int MAX_PER_THREAD, bool HAS_W, bool CAST_BEFORE_W>
__global__ void __launch_bounds__(1024) rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                             int n_cols, float eps, float w_offset) {
  __shared__ float smem[32];
  const long long row = blockIdx.x;
  const T* xr = x + row * n_cols;
  T* yr = y + row * n_cols;
  // The weight is read beside x, before the reduction (after it, a one-row call waits for a second DRAM
  // round trip), while the registers allow: not for the 32-per-thread rows of 1024-thread blocks.
  constexpr bool PRELOAD_W = HAS_W && MAX_PER_THREAD <= 8;
  float v[MAX_PER_THREAD], wv[PRELOAD_W ? MAX_PER_THREAD : 1];
  float ss = 0.f;
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    v[i] = c < n_cols ? to_f<T>(xr[c]) : 0.f;
    if (PRELOAD_W) wv[PRELOAD_W ? i : 0] = c < n_cols ? to_f<T>(w[c]) : 0.f;
    ss += v[i] * v[i];
  }
  float rstd;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(rstd) : "f"(block_reduce<false>(ss, smem) / n_cols + eps));
  #pragma unroll
  for (int i = 0; i < MAX_PER_THREAD; ++i) {
    int c = threadIdx.x + i * blockDim.x;
    if (c < n_cols) {
      float o = v[i] * rstd;
      if (HAS_W) {
        const float wc = PRELOAD_W ? wv[PRELOAD_W ? i : 0] : to_f<T>(w[c]);
        o = (CAST_BEFORE_W ? to_f<T>(from_f<T>(o)) : o) * (w_offset + wc);
      }
      yr[c] = from_f<T>(o);
    }
  }
}
