"""The CUDA element-wise template's vector kernel (act_vec), built by the host compiler and run CTA by CTA,
thread by thread (it has no barriers or shuffles, so the order does not matter), against torch on the CPU:
the plain and the gated layouts (two inputs, or the two halves of one), one and four vectors a thread, ragged
tails. tanh.approx is replaced by std::tanh here: the GPU's approximation is not what this test checks."""

from __future__ import annotations

import ctypes

import pytest
import torch
import torch.nn.functional as F

from agents.offline.templates import elementwise
from cuda_build import HOST_SHIMS, host_library  # tests/

_HOST = HOST_SHIMS + r"""
#define __expf(v) std::exp(v)
static inline float tanh_fast(float x) { return std::tanh(x); }
static inline float sigmoid_fast(float x) { return std::fma(0.5f, tanh_fast(0.5f * x), 0.5f); }
KERNELS
template <bool G, int U>
static void grid(const bf16* g, const bf16* u, bf16* y, long long nv, long long hv, long long in_cols, long long g_off,
                 long long u_off, int threads) {
  blockDim.x = threads;
  const long long blocks = (nv + (long long)threads * U - 1) / ((long long)threads * U);
  for (long long b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) {
      blockIdx.x = b; threadIdx.x = t;
      act_vec<bf16, G, U>(g, u, y, nv, hv, in_cols, g_off, u_off);
    }
}
extern "C" void emulate(int gated, int vectors, const void* g, const void* u, void* y, long long nv, long long hv,
                        long long in_cols, long long g_off, long long u_off, int threads) {
  const bf16 *gp = (const bf16*)g, *up = (const bf16*)u; bf16* yp = (bf16*)y;
  if (gated && vectors == 4) grid<true, 4>(gp, up, yp, nv, hv, in_cols, g_off, u_off, threads);
  if (gated && vectors == 1) grid<true, 1>(gp, up, yp, nv, hv, in_cols, g_off, u_off, threads);
  if (!gated && vectors == 4) grid<false, 4>(gp, up, yp, nv, hv, in_cols, g_off, u_off, threads);
  if (!gated && vectors == 1) grid<false, 1>(gp, up, yp, nv, hv, in_cols, g_off, u_off, threads);
}
"""

_TORCH = {"silu": F.silu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
          "gelu_quick": lambda v: v * torch.sigmoid(1.702 * v), "gelu": F.gelu}  # fmt: skip


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    root = tmp_path_factory.mktemp("elementwise_emulation")
    device = {act: elementwise.cuda_kernels(act).replace(elementwise.CUDA_FAST_MATH, "") for act in _TORCH}
    return {act: host_library(_HOST.replace("KERNELS", device[act]), root, act) for act in _TORCH}


@pytest.mark.parametrize("act", list(_TORCH))
@pytest.mark.parametrize("layout", ["plain", "two_inputs", "halves_gate_second"])
@pytest.mark.parametrize("vectors,threads", [(4, 128), (1, 64)])
def test_vector_kernel_matches_torch(host_kernels, act, layout, vectors, threads):
    torch.manual_seed(0)
    rows, half = 5, 8 * 37  # 185 vectors of 8: a ragged last block for both widths
    x = torch.randn(rows, 2 * half if layout == "halves_gate_second" else half).to(torch.bfloat16)
    if layout == "plain":
        g = u = x
        gated, in_cols, g_off, u_off, want = 0, half, 0, 0, _TORCH[act](x.float())
    elif layout == "two_inputs":
        g, u = x, torch.randn(rows, half).to(torch.bfloat16)
        gated, in_cols, g_off, u_off, want = 1, half, 0, 0, _TORCH[act](g.float()) * u.float()
    else:  # one input: the up half first, the gate second
        g = u = x
        gated, in_cols, g_off, u_off = 1, 2 * half, half, 0
        want = _TORCH[act](x[:, half:].float()) * x[:, :half].float()
    y = torch.full((rows, half), float("nan"), dtype=torch.bfloat16)
    nv = rows * half // 8
    host_kernels[act].emulate(gated, vectors, ctypes.c_void_p(g.data_ptr()), ctypes.c_void_p(u.data_ptr()),
                              ctypes.c_void_p(y.data_ptr()), ctypes.c_longlong(nv), ctypes.c_longlong(half // 8),
                              ctypes.c_longlong(in_cols), ctypes.c_longlong(g_off), ctypes.c_longlong(u_off),
                              ctypes.c_int(threads))  # fmt: skip
    assert not torch.isnan(y.float()).any()
    torch.testing.assert_close(y.float(), want.to(torch.bfloat16).float(), atol=2e-2, rtol=2e-2)
