
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
