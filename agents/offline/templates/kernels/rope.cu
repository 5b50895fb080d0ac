
constexpr int ROPE_MAX_HALF = 512;

template <typename T, int N> struct alignas(sizeof(T) * N) RopePack { T v[N]; };

// One CTA per token. The token's D/2 cos/sin go to shared memory once, computed in fp32 as the reference
// does (e = 2i * (1/D), inv = 1 / powf(theta, e) rounded to nearest, angle = (float)pos * inv; the _rn
// intrinsics keep fast-math or FMA contraction from changing a bit), with full-precision sincosf: the
// angles reach ~1e5 rad, far outside the range of the approximate intrinsics. Then every chunk of VEC pairs of every q and k
// head of the token is rotated (VEC * sizeof(T) = 16 bytes per load where aligned).
template <typename T, typename P, int VEC, bool INTERLEAVED>
__global__ void rope_tokens(const T* __restrict__ q, const T* __restrict__ k, T* __restrict__ qo,
                            T* __restrict__ ko, const P* __restrict__ pos, int hq, int hkv, int d, float theta,
                            float inv_d) {
  __shared__ float s_cos[ROPE_MAX_HALF], s_sin[ROPE_MAX_HALF];
  using Pack = RopePack<T, VEC>;
  const long long t = blockIdx.x;
  const int half = d >> 1;
  const int chunks = half / VEC;
  const int total = (hq + hkv) * chunks;
  // chunk w: head h, pairs i0 .. i0 + VEC; rotate-half: pair j is (x[i0 + j], x[half + i0 + j]); interleaved:
  // (x[2(i0 + j)], x[2(i0 + j) + 1])
  auto locate = [&](int w, long long& row, int& i0, int& off_a, int& off_b, bool& is_q) {
    const int h = w / chunks;
    i0 = (w - h * chunks) * VEC;
    is_q = h < hq;
    row = (is_q ? t * hq + h : t * hkv + (h - hq)) * (long long)d;
    off_a = INTERLEAVED ? 2 * i0 : i0;
    off_b = INTERLEAVED ? 2 * i0 + VEC : half + i0;
  };
  // Each thread's first chunk is requested before the position and the angles, so its DRAM round trip overlaps
  // theirs and the sincos math; loaded after the barrier, it waited for both (a 1-token call is two round trips).
  Pack first_a, first_b;
  const int first = threadIdx.x;
  if (first < total) {
    long long row;
    int i0, off_a, off_b;
    bool is_q;
    locate(first, row, i0, off_a, off_b, is_q);
    const T* x = (is_q ? q : k) + row;
    first_a = *reinterpret_cast<const Pack*>(x + off_a);
    first_b = *reinterpret_cast<const Pack*>(x + off_b);
  }
  const float p = (float)pos[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float e = __fmul_rn((float)(2 * i), inv_d);
    const float a = __fmul_rn(p, __frcp_rn(powf(theta, e)));
    float s, c;
    sincosf(a, &s, &c);
    s_cos[i] = c;
    s_sin[i] = s;
  }
  __syncthreads();
  for (int w = first; w < total; w += blockDim.x) {
    long long row;
    int i0, off_a, off_b;
    bool is_q;
    locate(w, row, i0, off_a, off_b, is_q);
    const T* x = (is_q ? q : k) + row;
    T* y = (is_q ? qo : ko) + row;
    const Pack a = w == first ? first_a : *reinterpret_cast<const Pack*>(x + off_a);
    const Pack b = w == first ? first_b : *reinterpret_cast<const Pack*>(x + off_b);
    Pack oa, ob;
    #pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float c = s_cos[i0 + j], s = s_sin[i0 + j];
      float x1, x2;
      if (INTERLEAVED) {
        const int e1 = 2 * j, e2 = 2 * j + 1;
        x1 = to_f<T>(e1 < VEC ? a.v[e1 % VEC] : b.v[e1 % VEC]);
        x2 = to_f<T>(e2 < VEC ? a.v[e2 % VEC] : b.v[e2 % VEC]);
      } else {
        x1 = to_f<T>(a.v[j]);
        x2 = to_f<T>(b.v[j]);
      }
      const T o1 = from_f<T>(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(-x2, s)));
      const T o2 = from_f<T>(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
      if (INTERLEAVED) {
        const int e1 = 2 * j, e2 = 2 * j + 1;
        if (e1 < VEC) oa.v[e1 % VEC] = o1; else ob.v[e1 % VEC] = o1;
        if (e2 < VEC) oa.v[e2 % VEC] = o2; else ob.v[e2 % VEC] = o2;
      } else {
        oa.v[j] = o1;
        ob.v[j] = o2;
      }
    }
    *reinterpret_cast<Pack*>(y + off_a) = oa;
    *reinterpret_cast<Pack*>(y + off_b) = ob;
  }
}
