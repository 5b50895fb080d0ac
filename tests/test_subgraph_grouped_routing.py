"""The group-limited routing family (``agents/offline/subgraph/families/grouped_routing``): the generator's router,
DeepSeek-V3's spelling (mask built by scatter and expand, filled with 0) and V2's (softmax, a group's best expert)
found and replaced with the rewritten graph equal to the reference on the CPU; unsorted picks, routers with no
groups and weights gathered from the biased choice left to what they are; the kernel equal to the op under
Triton's interpreter and compiled for sm_90."""

from __future__ import annotations

import types

import pytest
import torch

from agents.offline.subgraph.loops import captured
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted

_V3 = """
def run(logits, bias):
    t, e = logits.shape
    scores = logits.float().sigmoid()
    choice = scores + bias.unsqueeze(0)
    group_scores = choice.view(t, 8, e // 8).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=3, dim=-1, sorted=SORTED)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(t, 8, e // 8).reshape(t, e)
    masked = choice.masked_fill(~score_mask.bool(), 0.0)
    ids = torch.topk(masked, k=6, dim=-1, sorted=SORTED)[1]
    weights = GATHERED.gather(1, ids)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * 2.5, ids
"""
_V2 = """
def run(logits, bias):
    t, e = logits.shape
    scores = logits.softmax(dim=-1, dtype=torch.float32)
    group_scores = scores.view(t, 4, -1).amax(dim=-1)
    group_idx = torch.topk(group_scores, k=2, dim=-1)[1]
    keep = torch.zeros(t, 4, dtype=torch.bool).scatter(1, group_idx, True).repeat_interleave(e // 4, dim=1)
    ids = torch.where(keep, scores, float("-inf")).topk(4, dim=-1).indices
    return scores.gather(1, ids), ids
"""
_PLAIN = """
def run(logits, bias):
    w, ids = torch.softmax(logits.float(), dim=-1).topk(6, dim=-1)
    return w, ids
"""
_CASES = {  # name: (source, replaced)
    "deepseek_v3": (_V3.replace("SORTED", "True").replace("GATHERED", "scores"), True),
    "deepseek_v2_softmax_amax_no_bias": (_V2, True),
    "unsorted_picks": (_V3.replace("SORTED", "False").replace("GATHERED", "scores"), False),
    "weights_from_the_biased_choice": (_V3.replace("SORTED", "True").replace("GATHERED", "choice"), False),
    "no_groups": (_PLAIN, False),
}


def _fn(source: str):
    module = types.ModuleType("ref")
    exec("import torch\n" + source, module.__dict__)
    return module.run


def _args(t: int = 9, e: int = 64):
    gen = torch.Generator().manual_seed(13)
    return torch.randn(t, e, generator=gen), torch.rand(e, generator=gen) * 0.1


@pytest.mark.parametrize("name", sorted(_CASES))
def test_spellings_are_found_where_they_route_by_groups_and_the_graph_computes_the_reference(name):
    source, replaced = _CASES[name]
    fn, args = _fn(source), _args()
    gm, done = rewrite(captured(fn, args))
    found = [r for r in done if r.family == "grouped_routing"]
    assert bool(found) == replaced, done
    got, want = gm(*args), fn(*args)
    torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=1e-6)
    if replaced:  # sorted picks: the same experts in the same order
        assert torch.equal(got[1], want[1])


def test_the_generators_router_is_found_at_every_size():
    from solforge.problems.ops.moe import grouped_topk
    from solforge.problems.ops.common import token_rows

    draft = grouped_topk(experts=32, top_k=7, groups=4, top_groups=2, scale=2.0, rows=token_rows((1, 40)))
    scope: dict = {}
    exec(compile(draft.reference, "reference.py", "exec"), scope)  # noqa: S102 - the generator's own source
    assert list(draft.inputs) == ["router_logits", "correction_bias"] and "make_inputs" not in scope  # random inputs
    for t in (1, 40):
        args = _args(t, 32)
        gm, done = rewrite(captured(scope["run"], args))
        assert [r.description.split("(")[0] for r in done] == ["grouped_topk"], done
        for got, want in zip(gm(*args), scope["run"](*args), strict=True):
            assert torch.equal(got, want)


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.grouped_routing.kernel import grouped_topk
from agents.offline.subgraph.families.grouped_routing.op import _grouped_topk

gen = torch.Generator().manual_seed(2)
out = {}
cases = {  # name: (rows, experts, k, groups, top groups, group k, score, fill, bias, tile)
    "sigmoid_bias_inf": (5, 64, 6, 8, 3, 2, "sigmoid", float("-inf"), True, 128),
    "sigmoid_bias_zero_fill": (3, 32, 7, 4, 2, 2, "sigmoid", 0.0, True, 32),
    "softmax_best_of_group": (6, 48, 4, 4, 2, 1, "softmax", float("-inf"), False, 64),
}
for name, (t, e, k, g, tg, gk, score, fill, has_bias, tile) in cases.items():
    x = torch.randn(t, e, generator=gen)
    b = torch.rand(e, generator=gen) * 0.1 if has_bias else None
    w, ids = grouped_topk(x, b, k, g, tg, gk, score, fill, tile, 1)
    w0, ids0 = _grouped_topk(x, b, k, g, tg, gk, score, fill)
    out[name] = [(w - w0).abs().max().item(), bool(torch.equal(ids, ids0))]
print("RESULT" + json.dumps(out))
"""


@pytest.mark.slow
def test_the_kernel_matches_the_op_in_the_interpreter():
    pytest.importorskip("triton")
    got = run_interpreted(_INTERPRET_SCRIPT, [], timeout_s=300)
    assert set(got) == {"sigmoid_bias_inf", "sigmoid_bias_zero_fill", "softmax_best_of_group"}
    for name, (err, same_ids) in got.items():
        assert same_ids and err < 1e-6, (name, err)


@pytest.mark.parametrize("e,g,gk,tg,k,sigmoid", [(256, 8, 2, 4, 8, True), (64, 4, 1, 2, 6, False)])
def test_the_kernel_compiles_for_sm90(e, g, gk, tg, k, sigmoid):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.grouped_routing import kernel

    types_ = {"x_ptr": "*fp32", "b_ptr": "*fp32", "w_ptr": "*fp32", "id_ptr": "*i64", "fill": "fp32"}
    consts = dict(E=e, G=g, GK=gk, TOPG=tg, K=k, SIGMOID=sigmoid, HAS_BIAS=sigmoid, BLOCK=e,
                  G_PAD=g, K_PAD=1 << (k - 1).bit_length(), ROWS=8, EXACT_EXP=True)  # fmt: skip
    assert compile_sm90(kernel._grouped_topk_rows, types_, consts).asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("t", [1, 4096, 32768])
def test_the_op_on_a_gpu_agrees_with_torch(t):
    from agents.offline.subgraph.families.grouped_routing.op import GROUPED_TOPK, _grouped_topk

    x, b = torch.randn(t, 256, device="cuda"), torch.rand(256, device="cuda") * 0.1
    want = _grouped_topk(x, b, 8, 8, 4, 2, "sigmoid", float("-inf"))
    got = GROUPED_TOPK(x, b, 8, 8, 4, 2, "sigmoid", float("-inf"))
    assert torch.equal(got[1], want[1])  # the scores computed as torch does: near-ties fall the same way
    torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=1e-6)
