"""The CUDA GEMM template's split GEMV kernel (gemv_split), built by the host compiler and run CTA by CTA,
thread by thread, against torch on the CPU: one to eleven rows of a, whole-column CTAs and split columns with a
ragged last slice, bias and each epilogue, CTAs run in either order, and twice over the same counters.

The CTA sum is emulated in two passes over a CTA's threads: the first collects every thread's partial sums
(what thread 0 stores and counts in is discarded, and the counter is not touched), the second hands thread 0
the CTA's totals, as the barrier would. The launcher's choice of rows a CTA (MAXM) and vectors a lane (VPL)
is mirrored in `_dispatch`."""

from __future__ import annotations

import ctypes
import math

import pytest
import torch

from agents.offline.templates import matmul
from cuda_build import HOST_SHIMS, host_library  # tests/

_HOST = HOST_SHIMS + r"""
#include <algorithm>
using std::min;
static int sum_pass = 0;
static double row_sums[8];
static float row_totals[8];
template <int R, int WARPS> static void cta_sum_rows(float (&acc)[R], float (*)[R]) {
  for (int i = 0; i < R; ++i) {
    if (sum_pass == 0) row_sums[i] += acc[i];
    acc[i] = sum_pass == 0 ? 0.f : row_totals[i];
  }
}
static inline uint4 ld_nc_v4(const void* p) { uint4 r; std::memcpy(&r, p, 16); return r; }
template <typename T> static inline float vec_elem(const uint4& v, int e) {
  T t; std::memcpy(&t, reinterpret_cast<const char*>(&v) + e * sizeof(T), sizeof(T)); return to_f<T>(t);
}
template <int ACT> static inline float act_f(float v) {
  if (ACT == 1) return v > 0.f ? v : 0.f;
  if (ACT == 2) return 0.5f * v * (1.f + std::erf(v * 0.7071067811865476f));
  if (ACT == 3) return v / (1.f + std::exp(-v));
  if (ACT == 4) return std::tanh(v);
  return v;
}
static inline void __threadfence() {}
static inline void __syncthreads() {}
static inline unsigned atomicAdd(unsigned* p, unsigned v) {
  if (sum_pass == 0) return 0u;
  const unsigned old = *p; *p += v; return old;
}
template <typename T> static inline T __ldcg(const T* p) { return *p; }
KERNEL
template <int THREADS, int MAXM, int VPL, bool HB, int ACT>
static void grid(const bf16* a, const bf16* w, const bf16* bias, bf16* y, float* ws, unsigned* arrivals, int M,
                 int N, int K, int reverse) {
  constexpr int CHUNK = THREADS * 8 * VPL;
  const long long slices = (K + CHUNK - 1) / CHUNK, blocks = (M + MAXM - 1) / MAXM, ctas = N * slices;
  blockDim.x = THREADS; gridDim.x = ctas; gridDim.y = blocks;
  for (long long by = 0; by < blocks; ++by) {
    for (long long i = 0; i < ctas; ++i) {
      blockIdx.x = reverse ? ctas - 1 - i : i; blockIdx.y = by;
      for (int pass = 0; pass < 2; ++pass) {
        sum_pass = pass;
        if (pass == 0) for (int r = 0; r < 8; ++r) row_sums[r] = 0.0;
        else for (int r = 0; r < 8; ++r) row_totals[r] = (float)row_sums[r];
        for (int t = 0; t < THREADS; ++t) {
          threadIdx.x = t;
          gemv_split<bf16, THREADS, MAXM, VPL, HB, ACT>(a, w, bias, y, ws, arrivals, M, N, K, (int)slices);
        }
      }
    }
  }
}
extern "C" void emulate(int threads, int maxm, int vpl, int act, const void* a, const void* w, const void* bias,
                        void* y, float* ws, unsigned* arrivals, int M, int N, int K, int reverse) {
  const bf16 *ap = (const bf16*)a, *wp = (const bf16*)w, *bp = (const bf16*)bias; bf16* yp = (bf16*)y;
#define CASE(T, R, V, A) \
  if (threads == T && maxm == R && vpl == V && act == A) { \
    if (bp) grid<T, R, V, true, A>(ap, wp, bp, yp, ws, arrivals, M, N, K, reverse); \
    else grid<T, R, V, false, A>(ap, wp, bp, yp, ws, arrivals, M, N, K, reverse); }
  CASE(128, 1, 1, 0) CASE(256, 4, 2, 2) CASE(128, 8, 8, 1) CASE(128, 4, 2, 3) CASE(128, 4, 2, 4) CASE(128, 8, 8, 0) CASE(512, 1, 1, 0)
}
"""


def _dispatch(M: int, K: int, threads: int) -> tuple[int, int, int]:
    """(MAXM, VPL, slices) as launch_gemv_split and launch_split_rows choose them for bf16 (8 a vector)."""
    maxm = 1 if M == 1 else 4 if M <= 4 else 8
    per_lane = -(-(K // 8) // threads)
    vpl = next((v for v in (1, 2, 4, 8) if per_lane <= v), 8)
    return maxm, vpl, -(-K // (threads * 8 * vpl))


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    return host_library(_HOST.replace("KERNEL", matmul._CUDA_GEMV_SPLIT_KERNEL),
                        tmp_path_factory.mktemp("gemv_split_emulation"), "gemv_split")  # fmt: skip


_ACTS = {0: lambda v: v, 1: torch.relu, 2: torch.nn.functional.gelu, 3: torch.nn.functional.silu, 4: torch.tanh}


@pytest.mark.parametrize(
    "M,N,K,threads,act,bias,slices",
    [
        (1, 5, 1024, 128, 0, False, 1),  # one vector a lane, one CTA a column
        (3, 7, 3584, 256, 2, True, 1),  # linear_bias's K: 1.75 vectors a lane, the last lanes masked
        (11, 6, 16384, 128, 1, True, 2),  # two blocks of rows (8 + 3), two slices a column
        (2, 9, 2000, 128, 3, False, 1),  # a ragged last vector step
        (2, 9, 2000, 128, 4, True, 1),  # tanh
        (8, 4, 9000, 128, 0, True, 2),  # the second slice 808 elements long: some lanes load nothing
        (1, 3, 4096, 512, 0, False, 1),
        (5, 4, 20000, 128, 0, False, 3),  # three slices: only the last arrival may add them up
    ],
)
@pytest.mark.parametrize("reverse", [False, True])
def test_split_gemv_matches_torch(host_kernel, M, N, K, threads, act, bias, slices, reverse):
    maxm, vpl, got_slices = _dispatch(M, K, threads)
    assert got_slices == slices
    blocks = -(-M // maxm)
    counters = torch.zeros(blocks * N, dtype=torch.int32)
    for seed in (0, 1):  # the second call reuses the counters the first one left
        torch.manual_seed(seed)
        ws = torch.full((slices * M * N,), float("nan"))  # a fresh, unwritten workspace each call
        a = (torch.randn(M, K) / math.sqrt(K)).to(torch.bfloat16)
        w = torch.randn(N, K).to(torch.bfloat16)
        b = torch.randn(N).to(torch.bfloat16) if bias else None
        y = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
        host_kernel.emulate(threads, maxm, vpl, act, ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(w.data_ptr()),
                            ctypes.c_void_p(b.data_ptr() if bias else 0), ctypes.c_void_p(y.data_ptr()),
                            ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(counters.data_ptr()), M, N, K,
                            int(reverse))  # fmt: skip
        ref = a.float() @ w.float().T + (b.float() if bias else 0.0)
        want = _ACTS[act](ref).to(torch.bfloat16).float()
        assert not torch.isnan(y.float()).any()
        torch.testing.assert_close(y.float(), want, atol=2e-2, rtol=2e-2)
        assert counters.eq(0).all(), counters  # every launch leaves the arrival counters at zero
