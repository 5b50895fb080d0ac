
template <typename T, typename P, bool INTERLEAVED>
void launch_rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& qo, const at::Tensor& ko,
                 const at::Tensor& pos, long long tokens, int hq, int hkv, int d, float theta, int threads) {
  constexpr int V = 16 / sizeof(T);
  const int half = d / 2;
  const bool aligned = half % V == 0 &&
      reinterpret_cast<uintptr_t>(q.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(qo.data_ptr()) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(k.data_ptr()) % 16 == 0 && reinterpret_cast<uintptr_t>(ko.data_ptr()) % 16 == 0;
  const float inv_d = 1.0f / (float)d;
  auto stream = c10::cuda::getCurrentCUDAStream();
  const T* qp = reinterpret_cast<const T*>(q.data_ptr());
  const T* kp = reinterpret_cast<const T*>(k.data_ptr());
  T* qop = reinterpret_cast<T*>(qo.data_ptr());
  T* kop = reinterpret_cast<T*>(ko.data_ptr());
  const P* pp = reinterpret_cast<const P*>(pos.data_ptr());
  if (threads <= 0) {
    // one chunk a thread where a CTA can hold them all: every thread's chunk is then loaded before the
    // barrier, and a token costs one DRAM round trip instead of two
    const long long chunks = (long long)(hq + hkv) * (aligned ? half / V : half);
    const long long want = (chunks + 31) / 32 * 32;
    threads = (int)(want < 32 ? 32 : want > 1024 ? 1024 : want);
  }
  if (aligned)
    rope_tokens<T, P, V, INTERLEAVED><<<tokens, threads, 0, stream>>>(qp, kp, qop, kop, pp, hq, hkv, d, theta, inv_d);
  else
    rope_tokens<T, P, 1, INTERLEAVED><<<tokens, threads, 0, stream>>>(qp, kp, qop, kop, pp, hq, hkv, d, theta, inv_d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
