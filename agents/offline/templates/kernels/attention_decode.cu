
// Flash-decoding, one query token per sequence. CTA = (batch, kv head, split of the KV length); its warps take
// 16-key tiles round-robin and run every query head of the group at once on tensor cores (mma.m16n8k16, bf16 or
// fp16 in, fp32 accumulate), transposed so that the group is the n = 8 side:
//   S^T[16 keys x 8 heads] = K_tile[16 x D] . Q^T[D x 8]        (A = K rows straight from memory, B = Q)
//   O^T[D x 8 heads]      += V_tile^T[D x 16 keys] . P^T[16 x 8] (A = V repacked, B = P moved by movmatrix.trans)
// The sum over D in S^T is order-free, so lane (gr, t) = (lane / 4, lane % 4) loads 16 contiguous bytes
// (d = 32c + 8t .. + 8) of a K row and feeds them to two k16 steps; the same d order is used for Q. O^T's rows
// are the output d in the order d = NM * r + i (m tile i, row r), so each lane loads V as two contiguous runs of
// NM elements per key (d = NM*gr .. and D/2 + NM*gr ..). Softmax: exp2 domain (scores * scale * log2 e), per head
// running max / sum in fp32, P rounded to the input type for the second product (as the reference's probs).
// Warps merge through shared memory; with one split the CTA writes the output, else (m, l, acc) go to a float
// workspace and the last CTA of its (batch, kv head) to arrive merges the splits, in the same launch: a second
// merge kernel cost its launch's host gap inside the timed window (judged 10-12 us on an H200 for ~5 us of GPU
// work; one launch judged 6 us).
struct DecodeAttnArgs {
  long long sqb, sqh, skb, skh, sks, svb, svh, svs, sob, soh;  // element strides; the head dim is contiguous
  int HKV, G, L, chunk, splits;
  int head_mul_k, head_mul_g;  // query head of (kv head hk, group member g) = hk * head_mul_k + g * head_mul_g
  float qk_scale;              // softmax scale * log2(e)
};

__device__ __forceinline__ float attn_ex2(float x) {  // 2^x; -inf -> 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ uint32_t attn_trans8x8(uint32_t x) {  // an 8x8 b16 fragment, transposed
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <typename T> struct AttnMma {  // T: __nv_bfloat16 or __half; the PTX differs only in the type's name
  static constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  static_assert(kBf16 || std::is_same<T, __half>::value, "bf16 or fp16 inputs");
  static __device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    if constexpr (kBf16)
      asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
      asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {  // lo in the low half
    uint32_t r;
    if constexpr (kBf16)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};

template <int WORDS> __device__ __forceinline__ void attn_load(uint32_t (&w)[WORDS], const void* p) {
  static_assert(WORDS == 2 || WORDS == 4, "8- or 16-byte loads");
  if constexpr (WORDS == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x; w[1] = v.y;
  }
}
template <int WORDS> __device__ __forceinline__ void attn_zero(uint32_t (&w)[WORDS]) {
  #pragma unroll
  for (int i = 0; i < WORDS; ++i) w[i] = 0u;
}
template <typename T> __device__ __forceinline__ void attn_store4(T* p, float x, float y, float z, float w) {
  *reinterpret_cast<uint2*>(p) = make_uint2(AttnMma<T>::pack(x, y), AttnMma<T>::pack(z, w));
}

// Merge of one (group member g, 4 outputs d..d+3) over the splits of a pair, in split order:
// out = sum_s e_s acc_s / sum_s e_s l_s with e_s = 2^(m_s - max_s m_s). `ml(s)` and `acc(s)` read split s's
// (m, l) and its 4 accumulators: written by other CTAs of this launch, through L2 (ld.cg, never this SM's L1) or
// from their shared memory (a cluster).
template <typename T, typename ML, typename ACC>
__device__ __forceinline__ void decode_attn_merge(ML ml, ACC acc_of, int splits, T* __restrict__ dst) {
  float mx = -1e30f;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, ml(s).x);
  float l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  #pragma unroll 4
  for (int s = 0; s < splits; ++s) {
    const float2 m_l = ml(s);
    const float4 x = acc_of(s);
    const float e = attn_ex2(m_l.x - mx);
    l += e * m_l.y;
    acc.x += e * x.x; acc.y += e * x.y; acc.z += e * x.z; acc.w += e * x.w;
  }
  const float inv = 1.f / l;
  attn_store4<T>(dst, acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

// CLUSTER: the splits of a pair are one thread-block cluster. Each CTA keeps its merged (m, l, acc) in shared
// memory; after a cluster barrier every CTA merges a share of the pair's outputs, reading the partials of all
// the splits through distributed shared memory (dsmem_f2, dsmem_f4) in split order, as the arrival path reads
// them from L2. Why: the arrival path crosses L2 three times after the last tile (partials out, the counter,
// partials in). H200, L = 512: q32 kv8 5.4 us against 5.7-6.4 for the arrival variants, q64 5.7
// against 6.5-7.0.
template <typename T, int D, int THREADS, bool CLUSTER>
__global__ void __launch_bounds__(THREADS, 384 / THREADS)  // <= 168 registers at 128 threads: no spills
decode_attn_split(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                  float* __restrict__ ws_o, float2* __restrict__ ws_ml, unsigned* __restrict__ arrivals,
                  const DecodeAttnArgs a) {
  constexpr int W = THREADS / 32;  // warps; warp w takes the tiles w, w + W, ... of the CTA's chunk
  constexpr int KC = D / 32;       // 16-byte chunks of a K row per lane, two k16 steps each
  constexpr int NM = D / 16;       // m16 tiles of O^T
  constexpr int VW = NM / 2;       // 32-bit words in a V run of NM elements
  constexpr int DV = D / 4;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  __shared__ __align__(16) float s_o[W][8][D];
  __shared__ float s_m[W][8], s_l[W][8];
  __shared__ bool s_last;
  __shared__ __align__(16) float c_o[CLUSTER ? 8 : 1][CLUSTER ? D : 4];  // CLUSTER: this split's merged partials
  __shared__ float2 c_ml[8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
  const int split = blockIdx.x % a.splits, pair = blockIdx.x / a.splits;
  const int b = pair / a.HKV, hk = pair % a.HKV;
  const int begin = split * a.chunk, end = min(a.L, begin + a.chunk);

  uint32_t qf[KC][4];  // B of S^T: column gr = group member gr (zero past G), d = 32c + 8t .. + 8
  #pragma unroll
  for (int c = 0; c < KC; ++c) attn_zero<4>(qf[c]);
  if (gr < a.G) {
    const T* qp = q + b * a.sqb + (long long)(hk * a.head_mul_k + gr * a.head_mul_g) * a.sqh + 8 * t;
    #pragma unroll
    for (int c = 0; c < KC; ++c) attn_load<4>(qf[c], qp + 32 * c);
  }
  const T* kb = k + b * a.skb + hk * a.skh + 8 * t;
  const T* vb = v + b * a.svb + hk * a.svh + NM * gr;
  uint32_t kf[2][KC][4];   // A of S^T: keys tile + gr (r = 0) and tile + gr + 8 (r = 1)
  uint32_t vf[4][2][VW];   // keys tile + 2t + {0, 1, 8, 9}; runs d = NM*gr .. (0) and D/2 + NM*gr .. (1)
  auto load_k = [&](int tile) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = tile + gr + 8 * r;
      #pragma unroll
      for (int c = 0; c < KC; ++c) {
        if (key < end) attn_load<4>(kf[r][c], kb + key * a.sks + 32 * c);
        else attn_zero<4>(kf[r][c]);
      }
    }
  };
  auto load_v = [&](int tile) {
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = tile + 2 * t + (j & 1) + 8 * (j >> 1);
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (key < end) attn_load<VW>(vf[j][r], vb + key * a.svs + r * (D / 2));
        else attn_zero<VW>(vf[j][r]);
      }
    }
  };

  float o[NM][4];  // O^T tile i: rows d = NM*gr + i (0, 1) and D/2 + NM*gr + i (2, 3); heads 2t (0, 2), 2t+1 (1, 3)
  #pragma unroll
  for (int i = 0; i < NM; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -1e30f, m1 = -1e30f, l0 = 0.f, l1 = 0.f;  // heads 2t and 2t + 1; a finite floor keeps exp2 defined
  int tile = begin + 16 * warp;
  if (tile < end) {
    load_k(tile);
    load_v(tile);
  }
  for (; tile < end; tile += 16 * W) {  // warp-uniform: every lane runs the shuffles and mma below
    const int next = tile + 16 * W;
    float s[4] = {0.f, 0.f, 0.f, 0.f};  // S^T: (key gr, head 2t), (gr, 2t+1), (gr+8, 2t), (gr+8, 2t+1)
    #pragma unroll
    for (int c = 0; c < KC; ++c) {
      #pragma unroll
      for (int h = 0; h < 2; ++h)
        AttnMma<T>::mma(s, kf[0][c][2 * h], kf[1][c][2 * h], kf[0][c][2 * h + 1], kf[1][c][2 * h + 1],
                        qf[c][2 * h], qf[c][2 * h + 1]);
    }
    if (next < end) load_k(next);
    const bool ok0 = tile + gr < end, ok1 = tile + gr + 8 < end;
    const float s0 = ok0 ? s[0] * a.qk_scale : -INFINITY, s1 = ok0 ? s[1] * a.qk_scale : -INFINITY;
    const float s2 = ok1 ? s[2] * a.qk_scale : -INFINITY, s3 = ok1 ? s[3] * a.qk_scale : -INFINITY;
    float x0 = fmaxf(s0, s2), x1 = fmaxf(s1, s3);
    #pragma unroll
    for (int off = 4; off < 32; off <<= 1) {  // over the tile's keys (lanes of equal t)
      x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, off));
      x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, off));
    }
    const float n0 = fmaxf(m0, x0), n1 = fmaxf(m1, x1);
    const float al0 = attn_ex2(m0 - n0), al1 = attn_ex2(m1 - n1);
    m0 = n0;
    m1 = n1;
    const float p0 = attn_ex2(s0 - n0), p1 = attn_ex2(s1 - n1), p2 = attn_ex2(s2 - n0), p3 = attn_ex2(s3 - n1);
    l0 = l0 * al0 + (p0 + p2);
    l1 = l1 * al1 + (p1 + p3);
    // (key x head) 8x8 halves of P^T, moved to the (head x key) layout the B operand wants
    const uint32_t pb0 = attn_trans8x8(AttnMma<T>::pack(p0, p1)), pb1 = attn_trans8x8(AttnMma<T>::pack(p2, p3));
    #pragma unroll
    for (int i = 0; i < NM; ++i) {
      o[i][0] *= al0; o[i][1] *= al1; o[i][2] *= al0; o[i][3] *= al1;
      const unsigned sel = (i & 1) ? 0x7632u : 0x5410u;  // element i of two keys' runs -> one (key, key+1) pair
      AttnMma<T>::mma(o[i], __byte_perm(vf[0][0][i / 2], vf[1][0][i / 2], sel),
                      __byte_perm(vf[0][1][i / 2], vf[1][1][i / 2], sel),
                      __byte_perm(vf[2][0][i / 2], vf[3][0][i / 2], sel),
                      __byte_perm(vf[2][1][i / 2], vf[3][1][i / 2], sel), pb0, pb1);
    }
    if (next < end) load_v(next);
  }

  // merge the warps: per head, rescale each warp's (l, acc) to the CTA's max
  #pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  if (gr == 0) {
    s_m[warp][2 * t] = m0; s_m[warp][2 * t + 1] = m1;
    s_l[warp][2 * t] = l0; s_l[warp][2 * t + 1] = l1;
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r)
    #pragma unroll
    for (int e = 0; e < 2; ++e)
      #pragma unroll
      for (int i = 0; i < NM; i += 4)
        *reinterpret_cast<float4*>(&s_o[warp][2 * t + e][r * (D / 2) + NM * gr + i]) =
            make_float4(o[i][2 * r + e], o[i + 1][2 * r + e], o[i + 2][2 * r + e], o[i + 3][2 * r + e]);
  __syncthreads();
  for (int item = threadIdx.x; item < a.G * DV; item += THREADS) {
    const int g = item / DV, d = (item % DV) * 4;
    float mx = -1e30f;
    #pragma unroll
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, s_m[w][g]);
    float l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    #pragma unroll
    for (int w = 0; w < W; ++w) {
      const float e = attn_ex2(s_m[w][g] - mx);
      const float4 x = *reinterpret_cast<const float4*>(&s_o[w][g][d]);
      l += e * s_l[w][g];
      acc.x += e * x.x; acc.y += e * x.y; acc.z += e * x.z; acc.w += e * x.w;
    }
    if (a.splits == 1) {
      const float inv = 1.f / l;
      attn_store4<T>(out + b * a.sob + (long long)(hk * a.head_mul_k + g * a.head_mul_g) * a.soh + d,
                     acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    } else if constexpr (CLUSTER) {
      *reinterpret_cast<float4*>(&c_o[g][d]) = acc;
      if (d == 0) c_ml[g] = make_float2(mx, l);
    } else {
      const long long part = ((long long)pair * a.splits + split) * a.G + g;
      *reinterpret_cast<float4*>(ws_o + part * D + d) = acc;
      if (d == 0) ws_ml[part] = make_float2(mx, l);
    }
  }
  if (a.splits == 1) return;
  if constexpr (CLUSTER) {  // split = this CTA's rank in its pair's cluster
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    for (int item = split + a.splits * threadIdx.x; item < a.G * DV; item += a.splits * THREADS) {
      const int g = item / DV, d = (item % DV) * 4;
      decode_attn_merge<T>([&](int r) { return dsmem_f2(&c_ml[g], r); },
                           [&](int r) { return dsmem_f4(&c_o[g][d], r); },
                           a.splits, out + b * a.sob + (long long)(hk * a.head_mul_k + g * a.head_mul_g) * a.soh + d);
    }
    // every peer has read this CTA's partials before it leaves
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    return;
  }
  // Arrival (the threadFenceReduction pattern): every thread's partials are made visible device-wide before
  // thread 0 counts the CTA in; the CTA that counts last reads all of its pair's partials from L2.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&arrivals[pair], 1u) == (unsigned)a.splits - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int item = threadIdx.x; item < a.G * DV; item += THREADS) {
    const int g = item / DV, d = (item % DV) * 4;
    const long long first = (long long)pair * a.splits * a.G + g;  // part (pair, split s, g) = first + s * G
    auto part = [&](int s) { return first + (long long)s * a.G; };
    decode_attn_merge<T>([&](int s) { return __ldcg(&ws_ml[part(s)]); },
                         [&](int s) { return __ldcg(reinterpret_cast<const float4*>(ws_o + part(s) * D + d)); },
                         a.splits, out + b * a.sob + (long long)(hk * a.head_mul_k + g * a.head_mul_g) * a.soh + d);
  }
  // No other CTA of this pair touches the counter again in this launch: leave it zero for the next one.
  if (threadIdx.x == 0) arrivals[pair] = 0u;
}

// The data and the strides along three dims of t are multiples of `elems` elements (vector loads and stores).
static bool attn_aligned(const at::Tensor& t, int64_t elems, int64_t d0, int64_t d1, int64_t d2) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % (elems * t.element_size()) == 0 && t.stride(d0) % elems == 0 &&
         t.stride(d1) % elems == 0 && t.stride(d2) % elems == 0;
}

// The split kernel's resident CTAs per SM, read once per instantiation (the SM count: sm_count()).
template <typename T, int D, int THREADS> static int decode_attn_ctas_per_sm() {
  static int cached = 0;
  if (cached > 0) return cached;
  int n = 0;
  C10_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_attn_split<T, D, THREADS, false>, THREADS, 0));
  cached = n > 0 ? n : 1;
  return cached;
}

// Splits of the KV length: about WAVES x (resident CTAs) CTAs in all, at least one 16-key tile per warp, at most
// MAX_SPLITS (CLUSTER: 16, the largest cluster); chunks are whole tiles.
template <typename T, int D, int THREADS, int WAVES, bool CLUSTER>
static void decode_attention(const at::Tensor& q, const T* qp, const T* kp, const T* vp, T* op, long long B,
                             DecodeAttnArgs a, cudaStream_t stream) {
  constexpr int TILE = TILE_KEYS, MAX_SPLITS = CLUSTER ? 16 : MAX_SPLITS_PER_HEAD, W = THREADS / 32;
  const long long pairs = B * a.HKV;
  const long long target = (long long)WAVES * sm_count() * decode_attn_ctas_per_sm<T, D, THREADS>();
  long long splits = (target + pairs / 2) / pairs;
  const long long by_len = (a.L + (long long)TILE * W - 1) / ((long long)TILE * W);
  splits = splits < by_len ? splits : by_len;
  splits = splits < MAX_SPLITS ? splits : MAX_SPLITS;
  splits = splits > 1 ? splits : 1;
  long long chunk = (a.L + splits - 1) / splits;
  chunk = (chunk + TILE - 1) / TILE * TILE;
  splits = (a.L + chunk - 1) / chunk;
  a.chunk = (int)chunk;
  a.splits = (int)splits;
  TORCH_CHECK(pairs * splits < (1LL << 31), "decode attention: grid too large (", pairs * splits, " CTAs)");
  if (splits == 1) {
    decode_attn_split<T, D, THREADS, false><<<(unsigned)pairs, THREADS, 0, stream>>>(qp, kp, vp, op, nullptr,
                                                                                      nullptr, nullptr, a);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  if constexpr (CLUSTER) {  // a cluster of `splits` CTAs a pair; where the launch is refused, the arrival path
    const cudaError_t err = launch_clusters(decode_attn_split<T, D, THREADS, true>, dim3((unsigned)(pairs * splits)),
                                            dim3(THREADS), (unsigned)splits, stream, qp, kp, vp, op, (float*)nullptr,
                                            (float2*)nullptr, (unsigned*)nullptr, a);
    if (err == cudaSuccess) return;
    (void)cudaGetLastError();
  }
  const long long parts = pairs * splits * a.G;
  at::Tensor ws = q.new_empty({parts * (D + 2)}, q.options().dtype(at::kFloat));
  float* wo = reinterpret_cast<float*>(ws.data_ptr());
  float2* wml = reinterpret_cast<float2*>(wo + parts * D);
  unsigned* arrivals = arrival_counters(q, pairs, "decode attention");  // one per (batch, kv head)
  decode_attn_split<T, D, THREADS, false><<<(unsigned)(pairs * splits), THREADS, 0, stream>>>(qp, kp, vp, op, wo,
                                                                                              wml, arrivals, a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
