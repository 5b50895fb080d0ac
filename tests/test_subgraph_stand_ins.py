"""Capture through ops whose fake-tensor rule refuses what the real op takes: ``torch._grouped_mm`` outside
bfloat16 (a MoE layer's grouped GEMMs in float16 or float32) traces as a stand-in op computing the same, so the
families are found around it; in bfloat16 it stays the aten op. The stand-in's sync-free grouped GEMM matches
torch's in Triton's interpreter and compiles for sm_90."""

from __future__ import annotations

import pytest
import torch

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.region import target_name
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted

def _moe(dtype: str):
    """The generator's sparse MoE layer (router in float32, rows sorted by expert, grouped SwiGLU experts through
    ``torch._grouped_mm``, weighted scatter-add back) at a small size: its ``run`` and inputs for 6 tokens."""
    from solforge.problems.ops.common import token_rows
    from solforge.problems.ops.moe import moe_layer

    draft = moe_layer(hidden=16, intermediate=8, experts=4, top_k=2, renormalize=False, dtype=dtype,
                      rows=token_rows((6,)))  # fmt: skip
    scope: dict = {}
    exec(compile(draft.reference, "reference.py", "exec"), scope)  # noqa: S102 - the generator's own source
    args = scope["make_inputs"]({"T": 6, "H": 16, "I": 8, "E": 4}, "cpu")
    return scope["run"], tuple(args[n] for n in draft.inputs)


def test_a_half_precision_moe_layer_traces_and_its_router_and_activation_are_found():
    run, args = _moe("float16")
    gm = capture(run, args)
    ops = [target_name(n) for n in gm.graph.nodes]
    assert ops.count("grouped_mm") == 3 and "_grouped_mm" not in ops
    gm, done = rewrite(gm)
    # gemv: the router's linear, in fp32; index_add: the weighted rows added back per token
    assert sorted(r.family for r in done) == ["gated", "gemv", "index_add", "routing"]
    torch.testing.assert_close(gm(*args), run(*args), rtol=0, atol=0)


def test_bfloat16_keeps_the_aten_grouped_mm():
    ops = [target_name(n) for n in capture(*_moe("bfloat16")).graph.nodes]
    assert ops.count("_grouped_mm") == 3 and "grouped_mm" not in ops


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.grouped_mm_kernel import grouped_mm

CASES = {  # dtype, (rows, k, n, groups), tile (BLOCK_M, BLOCK_N, BLOCK_K, warps)
    "fp16_ragged_groups": (torch.float16, (37, 48, 40, 5), (16, 32, 16, 4)),
    "fp32_full_precision": (torch.float32, (20, 24, 24, 3), (16, 16, 16, 4)),
    "tile_taller_than_the_rows": (torch.float16, (9, 32, 16, 4), (64, 16, 32, 4)),
}
out = {}
g = torch.Generator().manual_seed(0)
for name in json.loads(sys.argv[2]):
    if name == "offsets_past_the_rows":  # clamped to the rows: nothing read or written past a and y
        a, b = torch.randn(10, 16, generator=g).half(), torch.randn(3, 16, 16, generator=g).half()
        y = grouped_mm(a, b, torch.tensor([4, 8, 50], dtype=torch.int32), 16, 16, 16, 4)
        out[name] = float((y[8:].float() - a[8:].float() @ b[2].float()).abs().max())
        continue
    if name == "many_groups_some_empty_int64_offsets":  # several tiles per group, empty groups first, between, last
        a, b = torch.randn(70, 32, generator=g).half(), torch.randn(9, 32, 24, generator=g).half()
        offs = torch.tensor([0, 0, 17, 17, 40, 41, 41, 70, 70], dtype=torch.int64)
        want = torch._grouped_mm(a, b, offs=offs.to(torch.int32))
        out[name] = float((grouped_mm(a, b, offs, 16, 16, 16, 4).float() - want.float()).abs().max())
        continue
    dt, (m, k, n, groups), tile = CASES[name]
    a = torch.randn(m, k, generator=g).to(dt)
    b = torch.randn(groups, n, k, generator=g).to(dt).transpose(-2, -1)  # stacked [N, K] weights read transposed
    offs = torch.tensor(sorted(torch.randint(0, m + 1, (groups - 1,), generator=g).tolist()) + [m], dtype=torch.int32)
    offs[1] = offs[0]  # an empty group
    want = torch._grouped_mm(a, b, offs=offs)
    out[name] = float((grouped_mm(a, b, offs, *tile).float() - want.float()).abs().max())
print("RESULT", json.dumps(out))
"""


@pytest.mark.slow
def test_the_sync_free_grouped_mm_matches_torch_in_the_interpreter():
    pytest.importorskip("triton")
    names = ["fp16_ragged_groups", "fp32_full_precision", "tile_taller_than_the_rows", "offsets_past_the_rows",
             "many_groups_some_empty_int64_offsets"]
    got = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=300)
    for name in names:
        # against torch's CPU op: one fp16 rounding apart at most (values ~6 here: an ulp is 0.004); a tile or group
        # read wrongly is off by the values themselves
        loose = name in ("offsets_past_the_rows", "many_groups_some_empty_int64_offsets")
        assert got[name] < (1e-2 if loose else 1e-5), (name, got[name])


@pytest.mark.parametrize("ab,block", [("fp16", (64, 64, 32)), ("fp32", (16, 64, 64)), ("fp16", (128, 128, 32)),
                                      ("fp16", (128, 128, 64))])
def test_the_grouped_mm_kernel_compiles_for_sm90(ab, block):
    pytest.importorskip("triton")
    from agents.offline.subgraph import grouped_mm_kernel as kernel

    types = {"a_ptr": f"*{ab}", "b_ptr": f"*{ab}", "offs_ptr": "*i32", "y_ptr": f"*{ab}", "M": "i32"}
    bm, bn, bk = block
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, BLOCK_G=16, IEEE=ab == "fp32")
    assert compile_sm90(kernel._grouped_mm_tiles, types, consts).asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_the_stand_in_on_a_gpu_agrees_with_torch_whichever_way_it_keeps(dtype):
    from agents.offline.subgraph import grouped_mm_kernel as kernel
    from agents.offline.subgraph.stand_ins import GROUPED_MM

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(300, 512, device="cuda", generator=g).to(dtype)
    b = (torch.randn(8, 1024, 512, device="cuda", generator=g) * 0.05).to(dtype).transpose(-2, -1)
    offs = torch.tensor([10, 10, 90, 150, 151, 200, 290, 300], device="cuda", dtype=torch.int32)
    want = torch._grouped_mm(a, b, offs=offs)
    for bm, bn, bk, warps in kernel._TILES:
        torch.testing.assert_close(kernel.grouped_mm(a, b, offs, bm, bn, bk, warps), want, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(GROUPED_MM(a, b, offs), want, atol=2e-2, rtol=2e-2)


def _dispatch(tokens: int = 7, experts: int = 6, top_k: int = 2):
    """The generator's MoE dispatch (stable sort by expert, gathered rows, ``torch.bincount`` counts per expert)."""
    from solforge.problems.ops.common import token_rows
    from solforge.problems.ops.composed import moe_dispatch

    draft = moe_dispatch(hidden=16, experts=experts, top_k=top_k, dtype="float32", rows=token_rows((tokens,)))
    scope: dict = {}
    exec(compile(draft.reference, "reference.py", "exec"), scope)  # noqa: S102 - the generator's own source
    args = scope["make_inputs"]({"T": tokens, "H": 16, "E": experts}, "cpu")
    return scope["run"], tuple(args[n] for n in draft.inputs)


def test_bincount_with_bins_given_traces_as_a_histogram_and_the_graph_computes_the_same():
    from agents.offline.subgraph.stand_ins import stood_in

    run, args = _dispatch()
    gm = capture(run, args)
    ops = [target_name(n) for n in gm.graph.nodes]
    assert "histogram" in ops and "bincount" not in ops
    assert stood_in(gm) == [("histogram", "bincount with no host sync")]
    for got, want in zip(gm(*args), run(*args), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_bincount_of_unknown_length_is_not_stood_in():
    from agents.offline.subgraph.capture import NotCapturable

    with pytest.raises(NotCapturable):  # no minlength: the length is the data's, no graph has it
        capture(lambda ids: torch.bincount(ids), (torch.tensor([0, 3, 3]),))
    with pytest.raises(NotCapturable):  # weighted counts keep the aten op too
        capture(lambda ids, w: torch.bincount(ids, w, minlength=4), (torch.tensor([0, 3]), torch.ones(2)))


def test_the_sync_free_counts_equal_bincount_and_drop_what_falls_outside_the_bins():
    from agents.offline.subgraph.stand_ins import _histogram, _histogram_cuda

    ids = torch.randint(0, 9, (500,))
    assert torch.equal(_histogram_cuda(ids, 9), torch.bincount(ids, minlength=9))
    assert torch.equal(_histogram_cuda(ids.int(), 12), torch.bincount(ids, minlength=12))
    outside = torch.tensor([0, 2, 2, 5, -1, 7])
    assert _histogram_cuda(outside, 4).tolist() == [1, 0, 2, 0]
    with pytest.raises(ValueError, match="past the last bin"):  # the plain op refuses what the counts would drop
        _histogram(torch.tensor([0, 2, 5]), 4)


def test_a_dispatch_problem_gets_a_subgraph_candidate_for_its_histogram(tmp_path):
    from agents.offline.subgraph.solution import find
    from sol_bench.problem import load_problem
    from solforge.problems.generate import GenerateConfig, generate

    generate(tmp_path / "set", GenerateConfig(seed=3, count=1, families=("moe_dispatch",), cpu_check_mib=16))
    (problem_dir,) = [d for d in (tmp_path / "set").rglob("definition.json")]
    found = find(load_problem(problem_dir.parent))
    assert found.families == ("histogram",) and found.replaced[0].description == "histogram: bincount with no host sync"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_histogram_on_a_gpu_equals_bincount_inside_a_cuda_graph():
    from agents.offline.subgraph.stand_ins import HISTOGRAM

    ids = torch.randint(0, 128, (4096,), device="cuda")
    HISTOGRAM(ids, 128)  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # a host sync inside would raise here
        counts = HISTOGRAM(ids, 128)
    graph.replay()
    assert torch.equal(counts, torch.bincount(ids, minlength=128))
