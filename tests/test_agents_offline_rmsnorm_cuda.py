"""The CUDA RMSNorm template's 16-byte kernel (rmsnorm_vec), built by the host compiler and run thread by
thread against torch on the CPU: bf16 rows of whole vectors, with and without a weight, the unit offset, the
cast before the weight, one to eight vectors a thread with masked tails.

The block reduction is emulated in two passes over a CTA's threads: the first collects every thread's partial
sum of squares (the output it writes is discarded), the second hands each thread the CTA's total, as the
barrier would. rsqrt.approx is std::sqrt and a division here."""

from __future__ import annotations

import ctypes

import pytest
import torch

from agents.offline.templates import rmsnorm
from cuda_build import HOST_SHIMS, host_library  # tests/

_RSQRT_ASM = 'asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(rstd) : "f"('

_HOST = HOST_SHIMS + r"""
static int reduce_pass = 0;
static double reduce_sum = 0.0;
static float reduce_total = 0.f;
template <bool IS_MAX> static float block_reduce(float v, float*) {
  if (reduce_pass == 0) { reduce_sum += v; return 0.f; }
  return reduce_total;
}
static inline float rsqrt_host(float v) { return 1.0f / std::sqrt(v); }
KERNEL
template <int VPT, bool W, bool C>
static void rows(const bf16* x, const bf16* w, bf16* y, long long n_rows, int n_cols, float eps, float off, int threads) {
  blockDim.x = threads;
  for (long long r = 0; r < n_rows; ++r) {
    blockIdx.x = r;
    reduce_pass = 0; reduce_sum = 0.0;
    for (int t = 0; t < threads; ++t) { threadIdx.x = t; rmsnorm_vec<bf16, VPT, W, C>(x, w, y, n_cols, eps, off); }
    reduce_pass = 1; reduce_total = (float)reduce_sum;
    for (int t = 0; t < threads; ++t) { threadIdx.x = t; rmsnorm_vec<bf16, VPT, W, C>(x, w, y, n_cols, eps, off); }
  }
}
extern "C" void emulate(int vpt, int has_w, int cast, const void* x, const void* w, void* y, long long n_rows,
                        int n_cols, float eps, float off, int threads) {
  const bf16 *xp = (const bf16*)x, *wp = (const bf16*)w; bf16* yp = (bf16*)y;
#define CASE(V) \
  if (vpt == V && has_w && cast) rows<V, true, true>(xp, wp, yp, n_rows, n_cols, eps, off, threads); \
  if (vpt == V && has_w && !cast) rows<V, true, false>(xp, wp, yp, n_rows, n_cols, eps, off, threads); \
  if (vpt == V && !has_w) rows<V, false, false>(xp, wp, yp, n_rows, n_cols, eps, off, threads);
  CASE(1) CASE(2) CASE(4) CASE(8)
}
"""


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    src = rmsnorm._CUDA_VEC_KERNEL
    assert src.count(_RSQRT_ASM) == 1
    device = src.replace(_RSQRT_ASM, "rstd = rsqrt_host((")
    return host_library(_HOST.replace("KERNEL", device), tmp_path_factory.mktemp("rmsnorm_emulation"), "rmsnorm")


@pytest.mark.parametrize("n_cols,threads", [(4096, 512), (4096, 128), (7168, 128), (3072, 256), (200, 8)])
@pytest.mark.parametrize("weight", ["none", "plain", "unit_offset", "cast_first"])
def test_vector_kernel_matches_torch(host_kernel, n_cols, threads, weight):
    torch.manual_seed(0)
    rows, eps = 3, 1e-6
    x = torch.randn(rows, n_cols).to(torch.bfloat16)
    w = torch.randn(n_cols).to(torch.bfloat16)
    offset = 1.0 if weight == "unit_offset" else 0.0
    vpt = -(-(n_cols // 8) // threads)
    vpt = next(v for v in (1, 2, 4, 8) if vpt <= v)  # the launcher's dispatch
    xf = x.float()
    n = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    if weight == "cast_first":
        n = n.to(torch.bfloat16).float()
    want = n if weight == "none" else n * (offset + w.float())
    y = torch.full((rows, n_cols), float("nan"), dtype=torch.bfloat16)
    host_kernel.emulate(vpt, weight != "none", weight == "cast_first", ctypes.c_void_p(x.data_ptr()),
                        ctypes.c_void_p(w.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(rows),
                        n_cols, ctypes.c_float(eps), ctypes.c_float(offset), threads)  # fmt: skip
    assert not torch.isnan(y.float()).any()
    torch.testing.assert_close(y.float(), want.to(torch.bfloat16).float(), atol=1e-2, rtol=1e-2)
