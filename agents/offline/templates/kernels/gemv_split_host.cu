
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
