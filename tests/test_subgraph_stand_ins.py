"""Capture through ops whose fake-tensor rule refuses what the real op takes: ``torch._grouped_mm`` outside
bfloat16 (a MoE layer's grouped GEMMs in float16 or float32) traces as a stand-in op computing the same, so the
families are found around it; in bfloat16 it stays the aten op."""

from __future__ import annotations

import torch

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.region import target_name
from agents.offline.subgraph.rewrite import rewrite

TOP_K, EXPERTS = 2, 4


def _moe(x, gate_weight, w_gate, w_up, w_down):
    """Router in float32, token rows sorted by expert, grouped SwiGLU experts, weighted scatter-add back."""
    t, h = x.shape
    weights, ids = torch.topk(torch.softmax(x.float() @ gate_weight.float().t(), dim=-1), TOP_K, dim=-1)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token_of = order // TOP_K
    rows = x[token_of]
    counts = (flat[:, None] == torch.arange(EXPERTS, device=x.device)[None, :]).sum(dim=0)
    offs = torch.cumsum(counts, dim=0).to(torch.int32)
    g = torch._grouped_mm(rows, w_gate.transpose(-2, -1), offs=offs)
    u = torch._grouped_mm(rows, w_up.transpose(-2, -1), offs=offs)
    act = (g.float() * torch.sigmoid(g.float()) * u.float()).to(x.dtype)
    y = torch._grouped_mm(act, w_down.transpose(-2, -1), offs=offs)
    out = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    out.index_add_(0, token_of, y.float() * weights.reshape(-1)[order][:, None])
    return out.to(x.dtype)


def _inputs(dtype, t=6, h=16, i=8):
    g = torch.Generator().manual_seed(4)
    return (torch.randn(t, h, generator=g).to(dtype), torch.randn(EXPERTS, h, generator=g).to(dtype),
            *(torch.randn(EXPERTS, *s, generator=g).mul(0.3).to(dtype) for s in ((i, h), (i, h), (h, i))))  # fmt: skip


def test_a_half_precision_moe_layer_traces_and_its_router_and_activation_are_found():
    args = _inputs(torch.float16)
    gm = capture(_moe, args)
    ops = [target_name(n) for n in gm.graph.nodes]
    assert ops.count("grouped_mm") == 3 and "_grouped_mm" not in ops
    gm, done = rewrite(gm)
    assert sorted(r.family for r in done) == ["gated", "routing"]
    torch.testing.assert_close(gm(*args), _moe(*args), rtol=0, atol=0)


def test_bfloat16_keeps_the_aten_grouped_mm():
    ops = [target_name(n) for n in capture(_moe, _inputs(torch.bfloat16)).graph.nodes]
    assert ops.count("_grouped_mm") == 3 and "grouped_mm" not in ops
