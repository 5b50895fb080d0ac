"""Small-M linear (y = a @ w.T + bias, at most 16 rows of a) as a split-K GEMV in Triton.

At a handful of rows a GEMM reads its weight once and does almost no math per byte: it is bound by the weight's
bytes, and what counts is how many of them are in flight at once. Each program takes a block of output columns
(rows of w) and one slice of K, and streams its ``[BLOCK_N, BLOCK_K]`` weight tiles against the rows of a
(padded to 16 for the tensor-core dot; fp32 operands are multiplied in fp32, not TF32); slices are chosen so that
about ``_TARGET_PROGRAMS`` programs fill the GPU whatever N is. With one slice the program adds the bias and
stores y; with several, each stores its fp32 partial sums and a second kernel adds them in slice order (the same
sum on every run) with the bias.

On CUDA each call shape runs the fastest that agrees with cuBLAS (``F.linear``, the default) of cuBLAS and the
kernel at a few block shapes, measured on the shape's first call (``measure.fastest``).
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl

from ..measure import DEFAULT, chosen_way

_TARGET_PROGRAMS = 264  # about two waves on a 132-SM H100/H200
_MAX_SPLIT = 32
_ROWS = 16  # BLOCK_M: every row of a in one tile (op.MAX_M, the matcher's bound, is the same number)
_BLOCKS = ((32, 128, 4), (64, 64, 4), (16, 256, 4))  # (BLOCK_N, BLOCK_K, warps): each a contender
# fp32 operands are multiplied in fp32 (FMA), as cuBLAS does with TF32 off (torch's default for matmul); the
# input_precision of half-precision operands is not used
_PRECISION = {torch.float32: "ieee"}
_CHOSEN: dict = {}  # per call shape: the way its first call measured fastest


@triton.jit
def _gemv_slice(a_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, sam, swn, k_per_split,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DIRECT: tl.constexpr,
                HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr = "tf32"):  # fmt: skip
    pid_n = tl.program_id(0)
    s = tl.program_id(1)
    m = tl.arange(0, BLOCK_M)
    n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = m < M, n < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    k_start = s * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    for k0 in range(k_start, k_end, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        k_ok = k < k_end
        a = tl.load(a_ptr + m[:, None] * sam + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptr + n[:, None].to(tl.int64) * swn + k[None, :], mask=n_ok[:, None] & k_ok[None, :],
                    other=0.0)  # fmt: skip
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    ok = m_ok[:, None] & n_ok[None, :]
    if DIRECT:
        if HAS_BIAS:
            acc += tl.load(bias_ptr + n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + m[:, None] * N + n[None, :], acc.to(out_ptr.dtype.element_ty), mask=ok)
    else:
        tl.store(out_ptr + (s * M + m[:, None]) * N + n[None, :], acc, mask=ok)


@triton.jit
def _gemv_sum(part_ptr, bias_ptr, y_ptr, M, N, n_split, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < M * N
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(n_split):
        acc += tl.load(part_ptr + s * M * N + i, mask=ok, other=0.0)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + i % N, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + i, acc.to(y_ptr.dtype.element_ty), mask=ok)


def takes(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether ``gemv`` serves this call (shapes and dtypes only)."""
    if a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1] or a.shape[0] > _ROWS:
        return False
    if a.dtype not in (torch.float16, torch.bfloat16, torch.float32) or w.dtype != a.dtype:
        return False
    return bias is None or (bias.dim() == 1 and bias.shape[0] == w.shape[0] and bias.dtype == a.dtype)


def split_of(n_blocks: int, k: int, block_k: int) -> tuple[int, int]:
    """(slices of K, K per slice): enough slices that the programs fill the GPU, each a whole number of
    ``block_k`` steps, no slice empty."""
    steps = max(1, triton.cdiv(k, block_k))
    want = max(1, min(_MAX_SPLIT, steps, triton.cdiv(_TARGET_PROGRAMS, max(n_blocks, 1))))
    per = triton.cdiv(steps, want) * block_k
    return max(1, triton.cdiv(k, per)), per


def gemv(a, w, bias, block_n=32, block_k=128, num_warps=4):
    m, k = a.shape
    n = w.shape[0]
    a = a if a.stride(-1) == 1 else a.contiguous()
    w = w if w.stride(-1) == 1 else w.contiguous()
    y = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if y.numel() == 0:
        return y
    if k == 0:
        return y.copy_(bias.expand(m, n)) if bias is not None else y.zero_()
    n_blocks = triton.cdiv(n, block_n)
    n_split, per = split_of(n_blocks, k, block_k)
    direct = n_split == 1
    out = y if direct else torch.empty((n_split, m, n), dtype=torch.float32, device=a.device)
    bias_arg = bias if bias is not None else y
    _gemv_slice[(n_blocks, n_split)](a, w, bias_arg, out, m, n, k, a.stride(0), w.stride(0), per, BLOCK_M=_ROWS,
                                     BLOCK_N=block_n, BLOCK_K=block_k, DIRECT=direct, HAS_BIAS=bias is not None,
                                     PRECISION=_PRECISION.get(a.dtype, "tf32"), num_warps=num_warps)  # fmt: skip
    if not direct:
        block = 1024
        _gemv_sum[(triton.cdiv(m * n, block),)](out, bias_arg, y, m, n, n_split, HAS_BIAS=bias is not None,
                                                BLOCK=block, num_warps=4)  # fmt: skip
    return y


def small_m_linear(a, w, bias):
    def cublas():
        return torch.nn.functional.linear(a, w, bias)

    if not a.is_cuda or not takes(a, w, bias):
        return cublas()
    ways: dict[str, Callable[[], torch.Tensor]] = {DEFAULT: cublas}
    for bn, bk, warps in _BLOCKS:
        ways[f"triton_gemv_{bn}x{bk}"] = lambda bn=bn, bk=bk, warps=warps: gemv(a, w, bias, bn, bk, warps)
    key = (tuple(a.shape), a.stride(), tuple(w.shape), bias is not None, a.dtype, a.device)
    way = chosen_way(key, ways, _CHOSEN, op="small_m_linear")
    return ways[way]()
