"""The block-scaled GEMM family (``families/scaled_mm``): a reference that dequantizes fp8 operands by per-tile
scales before its matmul is found however the scale grid is spelled, and replaced by one op computing the same;
look-alikes are left alone; the fused kernel matches the op in Triton's interpreter and compiles for sm_90."""

from __future__ import annotations

import pytest
import torch

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.families.scaled_mm.match import _blocks
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted

K_BLOCK, N_BLOCK = 32, 16


def _interleaved(a, a_scale, b, b_scale):
    """Scales repeated out per element (repeat_interleave, then cut to size), output rounded to bf16."""
    sa = a_scale.repeat_interleave(K_BLOCK, dim=1)[:, : a.shape[1]]
    sb = b_scale.repeat_interleave(N_BLOCK, dim=0)[: b.shape[0]].repeat_interleave(K_BLOCK, dim=1)[:, : b.shape[1]]
    return ((a.float() * sa) @ (b.float() * sb).t()).to(torch.bfloat16)


def _tiled(a, a_scale, b, b_scale):
    """The same grid through broadcasting views of the tiles, scale on the left, output left in float32."""
    m, k = a.shape
    n = b.shape[0]
    sa = a_scale[:, :, None].expand(m, k // K_BLOCK, K_BLOCK).reshape(m, k)
    sb = b_scale[:, None, :, None].expand(n // N_BLOCK, N_BLOCK, k // K_BLOCK, K_BLOCK).reshape(n, k)
    return (sa * a.float()) @ (sb * b.float()).t()


def _inputs(m=3, k=96, n=48, dtype=torch.float8_e4m3fn):
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(n, k, generator=g).to(dtype)
    a_scale = torch.rand(m, -(-k // K_BLOCK), generator=g) + 0.1
    b_scale = torch.rand(-(-n // N_BLOCK), -(-k // K_BLOCK), generator=g) + 0.1
    return a, a_scale, b, b_scale


@pytest.mark.parametrize("fn,out", [(_interleaved, torch.bfloat16), (_tiled, torch.float32)])
def test_a_dequantize_then_matmul_is_one_op_however_the_scales_are_spelled(fn, out):
    args = _inputs()
    gm, done = rewrite(capture(fn, args))
    assert [r.family for r in done] == ["scaled_mm"], done
    assert f"a_block=[1, {K_BLOCK}], b_block=[{N_BLOCK}, {K_BLOCK}], out_dtype={out}" in done[0].description
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and "mm" == str(n.target).split(".")[-2]]
    torch.testing.assert_close(gm(*args), fn(*args), rtol=0, atol=0)


def _families(fn, args) -> set[str]:
    return {r.family for r in rewrite(capture(fn, args))[1]}


def test_half_precision_operands_per_element_scales_and_a_grid_that_is_not_tiles_are_left_alone():
    # (the fp32 product of few rows left behind may still be a small-M linear: ``gemv``)
    assert "scaled_mm" not in _families(_interleaved, _inputs(dtype=torch.float16))

    def per_element(a, a_scale, b, b_scale):  # a full [M, K] of scales: no tiles to fuse
        full = a_scale.repeat_interleave(K_BLOCK, dim=1).exp()
        return (a.float() * full) @ b.float().t()

    def cycled(a, a_scale, b, b_scale):  # ``repeat`` cycles the scales: element k takes scale k % KB, not k // 32
        sa = a_scale.repeat(1, K_BLOCK)
        sb = b_scale.repeat_interleave(N_BLOCK, dim=0).repeat_interleave(K_BLOCK, dim=1)
        return (a.float() * sa) @ (b.float() * sb).t()

    assert "scaled_mm" not in _families(per_element, _inputs())
    assert "scaled_mm" not in _families(cycled, _inputs())  # proposed by its shapes, refused by the region check


def test_block_sizes_are_read_from_the_shapes():
    assert _blocks(576, 9) == [64]
    assert _blocks(2752, 22)[0] == 126 and 128 in _blocks(2752, 22)  # a ragged last block: 128 fits too
    assert _blocks(13, 13) == [1] and _blocks(1, 1)[0] == 1 and _blocks(5, 0) == []


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.scaled_mm.kernel import scaled_mm
from agents.offline.subgraph.families.scaled_mm.op import _scaled_mm

CASES = {  # m, k, n, a_block, b_block, tile (m, n)
    "ragged_k_and_rows": (5, 200, 70, [1, 64], [32, 64], (16, 32)),
    "row_blocks_of_a": (20, 128, 40, [8, 32], [16, 32], (16, 16)),
}
ok = {}
for name in json.loads(sys.argv[2]):
    m, k, n, ab, bb, (bm, bn) = CASES[name]
    g = torch.Generator().manual_seed(2)
    a = torch.randn(m, k, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, generator=g).to(torch.float8_e4m3fn)
    a_scale = torch.rand(-(-m // ab[0]), -(-k // ab[1]), generator=g) + 0.5
    b_scale = torch.rand(-(-n // bb[0]), -(-k // bb[1]), generator=g) + 0.5
    got = scaled_mm(a, a_scale, b, b_scale, ab, bb, torch.float32, bm, bn, 4, 2)
    want = _scaled_mm(a, a_scale, b, b_scale, ab, bb, torch.float32)
    ok[name] = float(((got - want).abs() / (want.abs() + 1)).max())
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_the_fused_kernel_matches_the_op_in_the_interpreter():
    pytest.importorskip("triton")
    names = ["ragged_k_and_rows", "row_blocks_of_a"]
    got = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=600)
    for name in names:
        assert got[name] < 1e-4, (name, got[name])


@pytest.mark.parametrize("block_m,block_n,block_k", [(16, 64, 128), (128, 128, 128), (64, 128, 64)])
def test_the_fused_kernel_compiles_for_sm90_on_fp8(block_m, block_n, block_k):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.scaled_mm import kernel

    types = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "as_ptr": "*fp32", "bs_ptr": "*fp32", "y_ptr": "*bf16"}
    got = compile_sm90(kernel._block_scaled_mm, types, dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k))
    assert got.asm["cubin"] and got.metadata.shared <= 227 * 1024


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("m,k,n,block", [(1, 2752, 4096, 128), (300, 576, 7552, 64)])
def test_the_op_on_a_gpu_agrees_with_the_dequantized_matmul(m, k, n, block):
    from agents.offline.subgraph.families.scaled_mm import kernel
    from agents.offline.subgraph.families.scaled_mm.op import SCALED_MM, _scaled_mm

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    a_scale = torch.rand(m, -(-k // block), device="cuda", generator=g) + 0.5
    b_scale = torch.rand(-(-n // block), -(-k // block), device="cuda", generator=g) * 0.05
    want = _scaled_mm(a, a_scale, b, b_scale, [1, block], [block, block], torch.bfloat16)
    for bm, bn, warps, stages in kernel._TILES:  # every contender, not only the kept one
        got = kernel.scaled_mm(a, a_scale, b, b_scale, [1, block], [block, block], torch.bfloat16, bm, bn, warps,
                               stages)
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    got = SCALED_MM(a, a_scale, b, b_scale, a_block=[1, block], b_block=[block, block], out_dtype=torch.bfloat16)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
