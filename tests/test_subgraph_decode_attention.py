"""Decode attention inside a reference (one query per sequence, soft-capped logits, ragged caches as a boolean
key mask): the attention family finds it, the rewritten graph computes what the reference does, and the
family's split-KV Triton kernel agrees with the op's own math in Triton's CPU interpreter."""

from __future__ import annotations

import pytest
import torch

from agents.offline.subgraph.capture import capture
from agents.offline.subgraph.region import target_name
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted


def decode_reference(softcap: float):
    """A decode step as model code writes one: repeated KV heads, the unit query dim squeezed before the cap and
    the mask, ``cache_lens`` the visible prefix of each sequence's cache."""

    def run(q, k_cache, v_cache, cache_lens):
        b, hq, d = q.shape
        hkv, length = k_cache.shape[1], k_cache.shape[2]
        k = k_cache.repeat_interleave(hq // hkv, dim=1)
        v = v_cache.repeat_interleave(hq // hkv, dim=1)
        scores = (q.unsqueeze(2) @ k.transpose(-1, -2)).squeeze(2).float() * d**-0.5
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        valid = torch.arange(length, device=q.device)[None, :] < cache_lens[:, None].long()
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(q.dtype)
        return (probs.unsqueeze(2) @ v).squeeze(2)

    return run


def _decode_args(b=3, hq=6, hkv=2, length=40, d=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    q = (torch.randn(b, hq, d, generator=g) * 3).to(dtype)
    k, v = ((torch.randn(b, hkv, length, d, generator=g) * 3).to(dtype) for _ in range(2))
    return [q, k, v, torch.tensor([length, 7, 23][:b], dtype=torch.int32)]


@pytest.mark.parametrize("softcap", [0.0, 30.0])
def test_decode_attention_with_a_ragged_cache_and_soft_cap_is_replaced_and_matches(softcap):
    run = decode_reference(softcap)
    args = _decode_args()
    gm, replaced = rewrite(capture(run, args))
    assert [r.family for r in replaced] == ["attention"], replaced
    consts = replaced[0].description
    assert f"softcap={softcap}" in consts and "query_squeezed=True" in consts and "mask_mode=2" in consts
    call = next(n for n in gm.graph.nodes if target_name(n) == "attention")
    assert [n.meta["val"].shape[1] for n in call.args[:3]] == [6, 2, 2]  # K/V reach the op unrepeated
    assert not {"tanh", "_softmax", "bmm", "repeat_interleave"} & {target_name(n) for n in gm.graph.nodes}
    # three sequences with different visible prefixes: the mask must broadcast per sequence, not per head
    torch.testing.assert_close(gm(*args), run(*args), rtol=1e-5, atol=1e-5)


def test_a_soft_cap_over_many_queries_is_left_to_inductor():
    """The op's Triton kernel serves one query; longer queries under a cap would run spelled-out math, slower
    than Inductor's fusion of the reference, so the family does not claim them."""

    def run(q, k, v):
        s = (q @ k.transpose(-1, -2)) * 0.25
        s = 50.0 * torch.tanh(s / 50.0)
        return torch.softmax(s, dim=-1) @ v

    args = [torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)]
    _, replaced = rewrite(capture(run, args))
    assert replaced == []
    one = [torch.randn(2, 4, 1, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)]
    gm, replaced = rewrite(capture(run, one))
    assert [r.family for r in replaced] == ["attention"] and "softcap=50.0" in replaced[0].description
    torch.testing.assert_close(gm(*one), run(*one), rtol=1e-5, atol=1e-5)


def test_the_decode_kernel_is_offered_only_where_it_serves_the_call():
    from agents.offline.subgraph.families.attention.kernel import _decode_ways

    q, k, v = torch.randn(2, 8, 1, 64), torch.randn(2, 2, 50, 64), torch.randn(2, 2, 50, 64)
    keep = torch.rand(2, 1, 1, 50) > 0.5
    assert sorted(_decode_ways(q, k, v, keep, False, 0.125, 30.0)) == [
        "triton_decode_128", "triton_decode_32", "triton_decode_64"]  # fmt: skip
    assert _decode_ways(q, k, v, None, False, 0.125, 0.0)
    assert not _decode_ways(q, k, v, keep.float(), False, 0.125, 0.0)  # an additive float mask
    assert not _decode_ways(q, k, v, keep, True, 0.125, 0.0)  # causal
    assert not _decode_ways(torch.randn(2, 8, 3, 64), k, v, keep, False, 0.125, 0.0)  # three queries
    assert not _decode_ways(torch.randn(2, 6, 1, 64), torch.randn(2, 4, 50, 64), v, None, False, 0.1, 0.0)  # 6 % 4
    assert not _decode_ways(q, k, v, torch.rand(3, 1, 1, 50) > 0.5, False, 0.125, 0.0)  # mask of another batch


_INTERPRET_SCRIPT = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from agents.offline.subgraph.families.attention.decode import decode_attention
from agents.offline.subgraph.families.attention.kernel import _math

CASES = {
    # (dtype, batch, q heads, kv heads, keys, head dim, v dim, soft cap, mask kind, block)
    "gqa_fp16_ragged_cap": (torch.float16, 3, 8, 2, 150, 64, 64, 30.0, "ragged", 32),
    "mha_fp32_nomask": (torch.float32, 2, 4, 4, 77, 80, 80, 0.0, None, 64),
    "mqa_fp32_per_head_mask": (torch.float32, 2, 6, 1, 90, 32, 48, 50.0, "per_head", 32),
    "fp16_hidden_blocks_and_a_blind_row": (torch.float16, 2, 4, 2, 200, 16, 16, 0.0, "sparse", 32),
}
ok = {}
for name in json.loads(sys.argv[2]):
    dtype, b, hq, hkv, n, d, dv, cap, kind, block = CASES[name]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, hq, 1, d, generator=g).to(dtype)
    k = torch.randn(b, hkv, n, d, generator=g).to(dtype)
    v = torch.randn(b, hkv, n, dv, generator=g).to(dtype)
    keep = None
    if kind == "ragged":
        keep = (torch.arange(n)[None, :] < torch.tensor([n, 5, 70])[:, None])[:, None, None, :]
    elif kind == "per_head":
        keep = torch.rand(b, hq, 1, n, generator=g) > 0.3
    elif kind == "sparse":  # keys 40-49 and 150-159 only: most blocks hidden from every head; sequence 1 sees none
        keep = torch.zeros(b, 1, 1, n, dtype=torch.bool)
        keep[0, ..., 40:50] = True
        keep[0, ..., 150:160] = True
    got = decode_attention(q, k, v, keep, d ** -0.5, cap, dtype, block).float()
    want = _math(q, k, v, keep, False, d ** -0.5, cap).float()
    nan_same = bool((got.isnan() == want.isnan()).all())
    finite = ~want.isnan()
    err = float((got[finite] - want[finite]).abs().max()) if finite.any() else 0.0
    ok[name] = {"nan_rows_alike": nan_same, "any_nan": bool(want.isnan().any()), "err_ok": err < (2e-2 if dtype == torch.float16 else 1e-4)}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_the_decode_kernel_matches_the_ops_math_in_the_interpreter():
    pytest.importorskip("triton")
    names = ["gqa_fp16_ragged_cap", "mha_fp32_nomask", "mqa_fp32_per_head_mask", "fp16_hidden_blocks_and_a_blind_row"]
    got = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=600)
    for name in names:
        assert got[name]["nan_rows_alike"] and got[name]["err_ok"], (name, got[name])
    assert got["fp16_hidden_blocks_and_a_blind_row"]["any_nan"]  # a sequence that sees no key is NaN, as softmax is


@pytest.mark.parametrize("dtype,head_dim,block", [("bf16", 128, 128), ("fp32", 64, 64), ("fp16", 256, 32)])
def test_the_decode_kernels_compile_for_sm90_within_its_shared_memory(dtype, head_dim, block):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.attention import decode

    floats = {"scale": "fp32", "softcap": "fp32"}
    ptrs = {n: f"*{dtype}" for n in ("q_ptr", "k_ptr", "v_ptr")} | {"keep_ptr": "*u8"}
    ptrs |= {n: "*fp32" for n in ("acc_ptr", "m_ptr", "l_ptr")}
    partial = compile_sm90(decode._decode_partial, ptrs | floats, dict(
        G=7, D=head_dim, DV=head_dim, BLOCK_G=16, BLOCK_D=head_dim, BLOCK_DV=head_dim, BLOCK_N=block, HAS_KEEP=True,
        HAS_CAP=True, IEEE=dtype == "fp32"))  # fmt: skip
    merge = compile_sm90(decode._decode_merge, {"acc_ptr": "*fp32", "m_ptr": "*fp32", "l_ptr": "*fp32",
                                                 "o_ptr": f"*{dtype}"}, dict(DV=head_dim, BLOCK_S=16, BLOCK_DV=head_dim))
    for kernel in (partial, merge):
        assert kernel.asm["cubin"] and kernel.metadata.shared <= 227 * 1024, kernel.metadata.shared
