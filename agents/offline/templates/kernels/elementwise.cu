
template <typename T, bool GATED, int U>
__global__ void act_vec(const T* __restrict__ g, const T* __restrict__ u, T* __restrict__ y, long long nv,
                        long long hv, long long in_cols, long long g_off, long long u_off) {
  constexpr int E = 16 / (int)sizeof(T);
  const long long first = (long long)blockIdx.x * blockDim.x * U + threadIdx.x;
  uint4 gv[U], uv[U];
  #pragma unroll
  for (int j = 0; j < U; ++j) {
    const long long iv = first + (long long)j * blockDim.x;
    if (iv < nv) {
      long long gi = iv * E, ui = iv * E;
      if (GATED) {
        const long long row = iv / hv, col = (iv - row * hv) * E;
        gi = row * in_cols + g_off + col;
        ui = row * in_cols + u_off + col;
      }
      gv[j] = *reinterpret_cast<const uint4*>(g + gi);
      if (GATED) uv[j] = *reinterpret_cast<const uint4*>(u + ui);
    }
  }
  #pragma unroll
  for (int j = 0; j < U; ++j) {
    const long long iv = first + (long long)j * blockDim.x;
    if (iv < nv) {
      uint4 ov;
      #pragma unroll
      for (int e = 0; e < E; ++e) {
        const float v = to_f<T>(reinterpret_cast<const T*>(&gv[j])[e]);
        float r = sizeof(T) < 4 ? (FAST_EXPR) : (ACT_EXPR);
        if (GATED) r *= to_f<T>(reinterpret_cast<const T*>(&uv[j])[e]);
        reinterpret_cast<T*>(&ov)[e] = from_f<T>(r);
      }
      *reinterpret_cast<uint4*>(y + iv * E) = ov;
    }
  }
}
template <typename T, bool GATED>
__global__ void act_mul(const T* __restrict__ g, const T* __restrict__ u, T* __restrict__ y, long long n,
                        long long half, long long in_cols, long long g_off, long long u_off) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    long long gi = i, ui = i;
    if (GATED) {
      const long long row = i / half, col = i - row * half;
      gi = row * in_cols + g_off + col;
      ui = row * in_cols + u_off + col;
    }
    const float v = to_f<T>(g[gi]);
    float r = sizeof(T) < 4 ? (FAST_EXPR) : (ACT_EXPR);
    if (GATED) r *= to_f<T>(u[ui]);
    y[i] = from_f<T>(r);
  }
}
