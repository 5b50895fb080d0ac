"""The small-M linear family (``families/gemv``): found where a linear layer runs on a handful of rows inside any
graph, left alone elsewhere; its split-K GEMV matches ``F.linear`` in Triton's interpreter and compiles for sm_90."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.region import target_name
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted


def _block(x, w_in, b_in, w_out, w_skip):
    h = torch.relu(F.linear(x, w_in, b_in))  # addmm(bias, x, w_in.T)
    y = h @ w_out.t()  # mm(h, w_out.T)
    return y + x @ w_skip  # a weight read as it is ([K, N]): not a linear of an [N, K] weight


def _inputs(tokens: int, dtype=torch.bfloat16, k=64, n=96):
    g = torch.Generator().manual_seed(3)
    make = lambda *s: (torch.randn(*s, generator=g) * 0.2).to(dtype)  # noqa: E731
    return make(2, tokens, k), make(n, k), make(n), make(k, n), make(k, k)


def _rewritten(fn, args):
    gm, done = rewrite(capture(fn, args))
    return gm, done


def test_linears_on_few_rows_are_found_inside_a_block_and_the_graph_still_computes_it():
    args = _inputs(tokens=3)  # 2 x 3 = 6 rows
    gm, done = _rewritten(_block, args)
    assert [r.family for r in done] == ["gemv", "gemv"]
    assert any("None" not in r.description for r in done) and any("None" in r.description for r in done)  # bias, none
    calls = [n for n in gm.graph.nodes if target_name(n) == "small_m_linear"]
    assert len(calls) == 2 and [n for n in gm.graph.nodes if target_name(n) == "mm"]  # the [K, N] read stays an mm
    torch.testing.assert_close(gm(*args), _block(*args), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fp32_and_fp16_linears_are_found_too(dtype):
    args = _inputs(tokens=3, dtype=dtype)
    gm, done = _rewritten(_block, args)
    assert [r.family for r in done] == ["gemv", "gemv"]
    torch.testing.assert_close(gm(*args), _block(*args), rtol=0, atol=0)


@pytest.mark.parametrize("why,args", [
    ("18 rows", _inputs(tokens=9)),  # 2 x 9 = 18 rows: a GEMM's tiles reuse the weight
    ("fp64", _inputs(tokens=3, dtype=torch.float64)),
])  # fmt: skip
def test_a_linear_outside_the_family_is_left_alone(why, args):
    _, done = _rewritten(_block, args)
    assert not done, why


def test_a_scaled_addmm_is_not_a_linear():
    def scaled(x, w, b):
        return torch.addmm(b, x, w.t(), beta=2.0)

    x, w, b = torch.randn(4, 32).bfloat16(), torch.randn(48, 32).bfloat16(), torch.randn(48).bfloat16()
    assert not _rewritten(scaled, (x, w, b))[1]


def test_the_kernel_takes_every_call_the_matcher_hands_it_and_no_more_rows():
    from agents.offline.subgraph.families.gemv.kernel import takes
    from agents.offline.subgraph.families.gemv.op import MAX_M

    w = torch.empty(64, 32, dtype=torch.bfloat16)
    assert takes(torch.empty(MAX_M, 32, dtype=torch.bfloat16), w, None)
    assert not takes(torch.empty(MAX_M + 1, 32, dtype=torch.bfloat16), w, None)


def test_split_of_fills_the_gpu_with_whole_steps_and_no_empty_slice():
    from agents.offline.subgraph.families.gemv.kernel import split_of

    for n_blocks, k, block_k in [(1, 4096, 128), (14, 640, 128), (128, 4096, 64), (300, 4096, 128), (3, 100, 256)]:
        n_split, per = split_of(n_blocks, k, block_k)
        assert per % block_k == 0 and (n_split - 1) * per < k <= n_split * per  # every slice holds some of K
        assert n_split == 1 or n_blocks * (n_split - 1) < 264  # no more slices than filling the GPU needs
    assert split_of(1, 4096, 128)[0] == 32 and split_of(300, 4096, 128)[0] == 1


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import torch.nn.functional as F
from agents.offline.subgraph.families.gemv.kernel import gemv

CASES = {  # m, k, n, bias, block_n, block_k, a's row stride (None: contiguous), dtype
    "one_row_split_k_bias": (1, 1000, 70, True, 32, 128, None, "float16"),
    "sixteen_rows_one_slice": (16, 64, 33, False, 16, 256, None, "float16"),
    "strided_rows_bias": (5, 300, 48, True, 64, 64, 320, "float16"),
    "fp32_split_k_bias": (3, 700, 40, True, 32, 128, None, "float32"),
}
ok = {}
for name in json.loads(sys.argv[2]):
    m, k, n, has_bias, bn, bk, row, dtype = CASES[name]
    dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(1)
    a = torch.randn(m, row or k, generator=g).to(dtype)[:, :k]
    w = (torch.randn(n, k, generator=g) * k ** -0.5).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype) if has_bias else None
    got = gemv(a, w, bias, bn, bk)
    want = F.linear(a.double(), w.double(), None if bias is None else bias.double())
    ok[name] = {"shape": list(got.shape) == [m, n], "dtype": got.dtype == dtype,
                "err": float((got.double() - want).abs().max())}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_the_gemv_matches_linear_in_the_interpreter():
    pytest.importorskip("triton")
    names = ["one_row_split_k_bias", "sixteen_rows_one_slice", "strided_rows_bias", "fp32_split_k_bias"]
    got = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=600)
    for name in names:
        tol = 1e-5 if name.startswith("fp32") else 1e-2  # fp32 in fp32: TF32's 10-bit mantissa would miss this
        assert got[name]["shape"] and got[name]["dtype"] and got[name]["err"] < tol, (name, got[name])


@pytest.mark.parametrize("dtype,block_n,block_k", [("bf16", 32, 128), ("fp16", 64, 64), ("bf16", 16, 256),
                                                    ("fp32", 32, 128)])  # fmt: skip
def test_the_gemv_kernels_compile_for_sm90(dtype, block_n, block_k):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.gemv import kernel

    ptrs = {"a_ptr": f"*{dtype}", "w_ptr": f"*{dtype}", "bias_ptr": f"*{dtype}"}
    precision = "ieee" if dtype == "fp32" else "tf32"
    for direct in (True, False):
        out = {"out_ptr": f"*{dtype}" if direct else "*fp32"}
        consts = dict(BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k, DIRECT=direct, HAS_BIAS=True, PRECISION=precision)
        part = compile_sm90(kernel._gemv_slice, ptrs | out, consts)
        assert part.asm["cubin"]
        # fp32 operands multiplied in fp32: FMAs, no tensor-core (TF32) MMA
        assert ("wgmma" in part.asm["ptx"] or "mma.sync" in part.asm["ptx"]) == (dtype != "fp32")
    total = compile_sm90(kernel._gemv_sum, {"part_ptr": "*fp32", "bias_ptr": f"*{dtype}", "y_ptr": f"*{dtype}"},
                         dict(HAS_BIAS=True, BLOCK=1024))  # fmt: skip
    assert total.asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("m,k,n,bias,dtype", [
    (1, 4096, 4096, False, torch.bfloat16), (7, 1000, 70, True, torch.bfloat16), (16, 2048, 6144, True, torch.bfloat16),
    (3, 2048, 1024, True, torch.float32),
])  # fmt: skip
def test_the_op_on_a_gpu_agrees_with_cublas_whichever_way_it_keeps(m, k, n, bias, dtype):
    from agents.offline.subgraph.families.gemv import kernel
    from agents.offline.subgraph.families.gemv.op import SMALL_M_LINEAR

    a = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
    b = torch.randn(n, device="cuda", dtype=dtype) if bias else None
    tol = 2e-4 if dtype == torch.float32 else 2e-2  # the region check's fp32 tolerance: TF32 would miss it
    for bn, bk, warps in kernel._BLOCKS:  # every contender, not only the kept one
        torch.testing.assert_close(kernel.gemv(a, w, b, bn, bk, warps), F.linear(a, w, b), atol=tol, rtol=tol)
    torch.testing.assert_close(SMALL_M_LINEAR(a, w, b), F.linear(a, w, b), atol=tol, rtol=tol)
    assert any(key[0] == (m, k) for key in kernel._CHOSEN)  # the shape's way was measured and kept
