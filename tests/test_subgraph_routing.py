"""The router top-k family (``families/routing``): softmax then top-k of float32 probabilities, renormalised or
not, is found alone or inside a MoE layer and replaced by one op computing the same; readings whose expert
order torch leaves unspecified are left alone; the kernel matches the op in Triton's interpreter (ties to the
lowest index) and compiles for sm_90."""

from __future__ import annotations

import pytest
import torch

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted


def _route(logits):
    w, ids = torch.topk(torch.softmax(logits, dim=-1), 6, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), ids


def _route_raw(logits):
    return torch.topk(torch.softmax(logits.float(), dim=-1), 4)


def _moe_router(x, gate, w_up):
    """Routing inside a block: the router's logits from an fp32 matmul, the weights scaling an expert's output."""
    w, ids = torch.topk(torch.softmax(x.float() @ gate.float().t(), dim=-1), 2, dim=-1)
    h = torch.relu(x @ w_up[0].t()).float()
    return (h * w.sum(dim=-1, keepdim=True)).to(x.dtype), ids


def _rewritten(fn, args):
    gm, done = rewrite(capture(fn, args))
    return gm, [(r.family, r.description) for r in done]


@pytest.mark.parametrize("fn,renorm", [(_route, True), (_route_raw, False)])
def test_softmax_then_topk_is_one_op_with_or_without_renormalising(fn, renorm):
    args = (torch.randn(37, 64),)
    gm, done = _rewritten(fn, args)
    assert done == [("routing", f"softmax_topk(logits_1; k={6 if renorm else 4}, renormalize={renorm})")]
    assert not [n for n in gm.graph.nodes if "topk.default" == str(n.target).split("aten.")[-1]]
    for got, want in zip(gm(*args), fn(*args)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_the_router_of_a_moe_block_is_found_inside_it():
    x, gate, w_up = torch.randn(5, 32).bfloat16(), torch.randn(8, 32).bfloat16(), torch.randn(2, 16, 32).bfloat16()
    gm, done = _rewritten(_moe_router, (x, gate, w_up))
    assert [f for f, _ in done].count("routing") == 1
    for got, want in zip(gm(x, gate, w_up), _moe_router(x, gate, w_up)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_unspecified_orders_and_other_reductions_are_left_alone():
    def half_logits(logits):  # bf16 logits tie often: torch.topk's order among them is not specified
        return torch.topk(torch.softmax(logits.float(), dim=-1), 4)

    def smallest(logits):
        return torch.topk(torch.softmax(logits, dim=-1), 4, largest=False)

    def across_tokens(logits):  # the softmax over another dim than the top-k's
        return torch.topk(torch.softmax(logits, dim=0), 4, dim=-1)

    assert not _rewritten(half_logits, (torch.randn(9, 64).bfloat16(),))[1]
    for fn in (smallest, across_tokens):
        assert not _rewritten(fn, (torch.randn(9, 64),))[1], fn.__name__


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.routing.kernel import softmax_topk
from agents.offline.subgraph.families.routing.op import _softmax_topk

CASES = {  # rows, experts, k, renormalize, dtype
    "rows_not_a_tile_multiple": (37, 60, 8, False, torch.float32),
    "renormalised_3d": ((3, 5), 64, 6, True, torch.float32),
    "half_logits_one_pick": (70, 8, 1, True, torch.float16),
    "wide_row": (3, 3000, 2, False, torch.float32),
    "small_tile_one_warp": (37, 60, 8, True, torch.float32),
}
TILES = {"small_tile_one_warp": (128, 1)}
out = {}
g = torch.Generator().manual_seed(3)
for name in json.loads(sys.argv[2]):
    if name == "ties":
        x = torch.zeros(2, 16)
        x[0, 9] = x[0, 5] = 1.0
        out[name] = softmax_topk(x, 4, False)[1].tolist()
        continue
    rows, e, k, renorm, dt = CASES[name]
    rows = rows if isinstance(rows, tuple) else (rows,)
    x = (torch.randn(*rows, e, generator=g) * 3).to(dt)
    w, i = softmax_topk(x, k, renorm, *TILES.get(name, (2048, 4)))
    w0, i0 = _softmax_topk(x, k, renorm)
    out[name] = [float((w - w0).abs().max()), bool(torch.equal(i, i0)), list(w.shape) == list(w0.shape)]
print("RESULT", json.dumps(out))
"""


@pytest.mark.slow
def test_the_kernel_matches_the_op_in_the_interpreter_and_breaks_ties_to_the_lowest_index():
    pytest.importorskip("triton")
    names = ["rows_not_a_tile_multiple", "renormalised_3d", "half_logits_one_pick", "wide_row", "small_tile_one_warp",
             "ties"]
    got = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=300)
    for name in names[:-1]:
        err, same_ids, same_shape = got[name]
        assert err < 1e-6 and same_ids and same_shape, (name, got[name])
    assert got["ties"] == [[5, 9, 0, 1], [0, 1, 2, 3]]


@pytest.mark.parametrize("block,rows,k", [(64, 32, 8), (256, 8, 6), (4096, 1, 1)])
def test_the_kernel_compiles_for_sm90(block, rows, k):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.routing import kernel

    types = {"x_ptr": "*fp32", "w_ptr": "*fp32", "id_ptr": "*i64"}
    consts = dict(K=k, K_PAD=max(1, 1 << (k - 1).bit_length()), BLOCK=block, ROWS=rows, RENORM=True)
    assert compile_sm90(kernel._softmax_topk_rows, types, consts).asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("t,e,k,renorm", [(1, 64, 6, True), (4097, 60, 8, False), (32768, 128, 8, True)])
def test_the_op_on_a_gpu_agrees_with_torch(t, e, k, renorm):
    from agents.offline.subgraph.families.routing.op import SOFTMAX_TOPK, _softmax_topk

    x = torch.randn(t, e, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0)) * 2
    from agents.offline.subgraph.families.routing import kernel

    w0, ids0 = _softmax_topk(x, k, renorm)
    got = [SOFTMAX_TOPK(x, k=k, renormalize=renorm)]  # the way its first call kept
    got += [kernel.softmax_topk(x, k, renorm, tile, warps) for tile, warps in kernel._TILES]  # every contender
    for w, ids in got:
        torch.testing.assert_close(w, w0, rtol=1e-5, atol=1e-6)
        assert float((ids == ids0).float().mean()) > 0.9999  # a float32 tie (equal logits) may order two experts


def test_the_subgraph_runner_tells_what_it_replaced_per_signature(capsys):
    from agents.offline import replay
    from agents.offline.subgraph.runtime import Runner

    runner = Runner(_route, 2, replay._into, replay._graphed, replay._signature)
    x = torch.randn(37, 64)
    w, ids = torch.empty(37, 6), torch.empty(37, 6, dtype=torch.int64)
    runner(x, w, ids)
    runner(x, w, ids)  # the same signature: told once
    want_w, want_ids = _route(x)
    assert torch.equal(w, want_w) and torch.equal(ids, want_ids)
    told = [x for x in capsys.readouterr().err.splitlines() if x.startswith("solforge ")]
    assert told == ["solforge subgraph [(37, 64)]: replaced softmax_topk(logits_1; k=6, renormalize=True)"]


def test_a_way_agrees_with_the_default_only_with_equal_indices_and_close_values():
    from agents.offline.subgraph.families.measure import agrees

    w, ids = torch.tensor([[0.5, 0.25]]), torch.tensor([[40, 7]])
    assert agrees((w + 1e-3, ids.clone()), (w, ids))
    assert not agrees((w, torch.tensor([[41, 7]])), (w, ids))  # within 2% of 40, but another expert
    assert not agrees((w + 0.1, ids), (w, ids)) and not agrees((w,), (w, ids)) and not agrees(w[:, :1], w)
    assert agrees(w.half(), w)  # a single tensor, another float dtype
