"""Kernel families found inside composite references (``agents/offline/subgraph``): each family is found where
it occurs, decoys that look alike are left alone, and the rewritten graph computes what the reference does."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from agents.offline.agent import plan
from agents.offline.subgraph import solution as subgraph_solution
from agents.offline.subgraph.capture import NotCapturable, capture
from agents.offline.subgraph.region import target_name
from agents.offline.subgraph.rewrite import rewrite
from sol_bench.inputs import make_inputs
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference
from tests.triton_interp import run_interpreted

HEADS, KV_HEADS, HEAD_DIM, HIDDEN, INTER = 4, 2, 16, 64, 96

# A decoder-ish block: add+RMSNorm -> QKV matmul -> spelled-out causal GQA attention -> o-proj -> add+RMSNorm ->
# gated MLP (one up-projection chunked into gate and up), followed by two decoys: a "norm" over the wrong dim
# and a sigmoid gate (no activation of the gated family).
BLOCK = f"""
import torch
import torch.nn.functional as F

HEADS, KV_HEADS, HEAD_DIM = {HEADS}, {KV_HEADS}, {HEAD_DIM}


def rmsnorm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def attention(q, k, v):
    s, group = q.shape[-2], HEADS // KV_HEADS
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) * HEAD_DIM ** -0.5
    causal = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def heads(t, n):
    return t.view(t.shape[0], n, HEAD_DIM).transpose(0, 1).unsqueeze(0)


def run(x, residual, attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down, w_decoy):
    t = x.shape[0]
    h = x + residual
    qkv = rmsnorm(h, attn_norm, 1e-6) @ wqkv.t()
    q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
    o = attention(heads(q, HEADS), heads(k, KV_HEADS), heads(v, KV_HEADS))[0]
    h = h + o.transpose(0, 1).reshape(t, HEADS * HEAD_DIM) @ wo.t()
    gate, up = (rmsnorm(h, mlp_norm, 1e-6) @ w_gate_up.t()).chunk(2, dim=-1)
    y = h + (F.silu(gate.float()) * up.float()).to(x.dtype) @ w_down.t()
    yf = y.float()
    decoy_norm = (yf * torch.rsqrt(yf.pow(2).mean(0, keepdim=True) + 1e-6)).to(x.dtype) * w_decoy
    decoy_gate = torch.sigmoid(gate) * up
    return y, decoy_norm, decoy_gate
"""

_INPUTS = {"x": ["T", "H"], "residual": ["T", "H"], "attn_norm": ["H"], "wqkv": ["QKV", "H"], "wo": ["H", "QD"],
           "mlp_norm": ["H"], "w_gate_up": ["I2", "H"], "w_down": ["H", "I"], "w_decoy": ["H"]}  # fmt: skip
_AXES = {"T": {"type": "var"}, "H": {"type": "const", "value": HIDDEN},
         "QKV": {"type": "const", "value": (HEADS + 2 * KV_HEADS) * HEAD_DIM},
         "QD": {"type": "const", "value": HEADS * HEAD_DIM}, "I": {"type": "const", "value": INTER},
         "I2": {"type": "const", "value": 2 * INTER}}  # fmt: skip


def write_block(root: Path, dtype: str = "float32") -> Path:
    """The block above as a problem directory (two workloads)."""
    root.mkdir(parents=True, exist_ok=True)
    definition = {
        "name": "decoderish_block", "op_type": "decoder_layer", "axes": _AXES, "reference": BLOCK,
        "inputs": {n: {"shape": s, "dtype": dtype} for n, s in _INPUTS.items()},
        "outputs": {"y": {"shape": ["T", "H"], "dtype": dtype}, "decoy_norm": {"shape": ["T", "H"], "dtype": dtype},
                    "decoy_gate": {"shape": ["T", "I"], "dtype": dtype}},
    }  # fmt: skip
    (root / "definition.json").write_text(json.dumps(definition))
    rows = [{"uuid": f"w{t}", "axes": {"T": t}, "inputs": {n: {"type": "random"} for n in _INPUTS}} for t in (5, 12)]
    (root / "workload.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    return load_problem(write_block(tmp_path_factory.mktemp("block")))


def _inputs(problem, seed=3):
    ref = load_reference(problem.definition)
    w = problem.workloads[0]
    return ref, list(make_inputs(problem.definition, w, "cpu", seed=seed, reference=ref).values())


def _ops(gm) -> Counter:
    return Counter(target_name(n) for n in gm.graph.nodes if n.op == "call_function")


def test_each_family_found_the_right_number_of_times_and_output_matches(block):
    ref, args = _inputs(block)
    want = ref.run(*args)
    gm, replaced = rewrite(capture(ref.run, args))
    kinds = Counter(r.description.split("(")[0] for r in replaced)
    assert kinds == {"add_rmsnorm": 2, "attention": 1, "gated": 1, "small_m_linear": 4}, replaced  # fp32 block
    attention = next(r.description for r in replaced if r.family == "attention")
    assert "causal=True" in attention and "mask_mode=0" in attention  # the constant tril mask read as causal
    ops = _ops(gm)
    assert ops["_softmax"] == 0 and ops["rsqrt"] == 1 and ops["sigmoid"] == 1  # decoys stay as they were
    assert ops["add_rmsnorm"] == 2 and ops["attention"] == 1 and ops["gated"] == 1 and ops["small_m_linear"] == 4
    got = gm(*args)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_gqa_reaches_the_op_unrepeated(block):
    ref, args = _inputs(block)
    gm, _ = rewrite(capture(ref.run, args))
    call = next(n for n in gm.graph.nodes if target_name(n) == "attention")
    q, k, v = (n.meta["val"].shape for n in call.args[:3])
    # the op takes (..., heads, seq, head_dim): here the 3-D tensors before the reference's unsqueeze(0)
    assert q[-3] == HEADS and k[-3] == KV_HEADS and v[-3] == KV_HEADS


@pytest.mark.parametrize(
    "body, expected",
    [
        ("xf = x.float()\n"
         "    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * (1.0 + w.float())).to(x.dtype)",
         "rmsnorm(x_1, w_1; eps=1e-05, offset=1.0, cast_before_weight=False"),  # w.float(): the op widens w itself
        ("xf = x.float()\n    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)",
         "rmsnorm(x_1, w_1; eps=1e-06, offset=0.0, cast_before_weight=True"),  # rounded before the weight
        ("return torch.nn.functional.rms_norm(x, (32,), w, 1e-6)", "rmsnorm(x_1, w_1; eps=9.99"),  # eps as fp32
        ("return torch.nn.functional.gelu(x, approximate='tanh') * w", None),  # w broadcasts: not a gated site
        ("a, b = x.chunk(2, -1)\n    return torch.nn.functional.gelu(a) * b", "gated(getitem, getitem_1; act=gelu,"),
        ("a, b = x.chunk(2, -1)\n    return torch.nn.functional.gelu(a, approximate='tanh') * b",
         "gated(getitem, getitem_1; act=gelu_tanh, act_dtype=torch.bfloat16"),
        ("a, b = x.chunk(2, -1)\n    return torch.tanh(a) * b", None),  # tanh gate: no activation of the family
        ("xf = x.float()\n    return (xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + 1e-5)).to(x.dtype)", None),
        ("c = x.float() - x.float().mean(-1, keepdim=True)\n"
         "    return (c * torch.rsqrt((c * c).mean(-1, keepdim=True) + 1e-5) * w).to(x.dtype)", None),  # a LayerNorm
    ],
    ids=["unit_offset", "cast_before_weight", "functional_rms_norm", "broadcast_gate", "chunked_geglu",
         "chunked_geglu_tanh", "tanh_gate_decoy", "sum_not_mean", "layernorm_not_rmsnorm"],
)
def test_spellings_and_decoys(body, expected):
    ns: dict = {"torch": torch}
    exec(f"def f(x, w):\n    {body}\n", ns)
    x, w = torch.randn(6, 32, dtype=torch.bfloat16), torch.randn(32, dtype=torch.bfloat16)
    gm, replaced = rewrite(capture(ns["f"], [x, w]))
    descriptions = [r.description for r in replaced]
    if expected is None:
        assert descriptions == []
    else:
        assert len(descriptions) == 1 and descriptions[0].startswith(expected), descriptions
        # nothing of the region is left behind, the in-place eps add of F.rms_norm included
        assert not {"rsqrt", "mean", "add_", "gelu", "erf", "tanh", "sigmoid"} & set(_ops(gm)), _ops(gm)
    torch.testing.assert_close(gm(x, w), ns["f"](x, w), rtol=2e-2, atol=2e-2)


def test_additive_mask_attention_is_replaced_with_the_mask_as_input():
    def f(q, k, v, mask):
        return torch.softmax(q @ k.transpose(-1, -2) / 8.0 + mask, dim=-1) @ v

    args = [torch.randn(2, 3, 7, 16), torch.randn(2, 3, 9, 16), torch.randn(2, 3, 9, 16), torch.randn(2, 1, 7, 9)]
    gm, replaced = rewrite(capture(f, args))
    assert [r.description.split(";")[1].strip() for r in replaced] == [
        "scale=0.125, causal=False, mask_mode=1, out_dtype=torch.float32, softcap=0.0, query_squeezed=False)"
    ]
    torch.testing.assert_close(gm(*args), f(*args), rtol=1e-5, atol=1e-5)


def test_sdpa_on_repeated_heads_gets_them_unrepeated_and_the_views_after_it_still_run():
    def f(q, k, v):  # [s, heads, d] in and [s, heads * d] out, as a decoder layer holds them
        qh = q.transpose(0, 1).unsqueeze(0)
        kh = k.transpose(0, 1).repeat_interleave(2, dim=0).unsqueeze(0)
        vh = v.transpose(0, 1).repeat_interleave(2, dim=0).unsqueeze(0)
        o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=True)[0]
        return o.transpose(0, 1).reshape(q.shape[0], -1)  # a view of SDPA's [b, s, h, d] layout in the trace

    args = [torch.randn(7, 4, 16), torch.randn(7, 2, 16), torch.randn(7, 2, 16)]
    gm, replaced = rewrite(capture(f, args))
    assert [r.description.split(";")[1].strip() for r in replaced] == [
        "scale=0.25, causal=True, mask_mode=0, out_dtype=torch.float32)"
    ]
    call = next(n for n in gm.graph.nodes if target_name(n) == "attention")
    assert [n.meta["val"].shape[-3] for n in call.args[:3]] == [4, 2, 2]
    torch.testing.assert_close(gm(*args), f(*args), rtol=1e-5, atol=1e-5)


def test_an_sdpa_call_with_nothing_to_take_away_is_left_alone():
    def f(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    args = [torch.randn(1, 4, 7, 16), torch.randn(1, 4, 7, 16), torch.randn(1, 4, 7, 16)]
    assert rewrite(capture(f, args))[1] == []


def test_data_dependent_reference_is_not_capturable():
    with pytest.raises(NotCapturable):
        capture(lambda x: x[x > 0].sum(), [torch.randn(8)])


def test_errors_inside_find_or_rendering_leave_the_plan_without_the_candidate(block, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a matcher's bug")

    def groups() -> list[str]:
        return [p.group for p in plan(block, "cuda", "triton") if p.group.startswith("subgraph/")]

    assert groups() == ["subgraph/attention+gated+gemv+rmsnorm"]  # before anything breaks
    monkeypatch.setattr(subgraph_solution, "rewrite", broken)
    found = subgraph_solution.find(block)
    assert found.replaced == () and found.why == "rewrite failed: RuntimeError: a matcher's bug"
    assert groups() == []
    monkeypatch.undo()
    monkeypatch.setattr(subgraph_solution, "solution", broken)
    assert groups() == []


@pytest.mark.slow
def test_plan_on_a_gpu_yields_the_subgraph_candidate_for_a_generated_block(tmp_path):
    from solforge.problems.generate import GenerateConfig, generate

    manifest = generate(tmp_path / "gen", GenerateConfig(seed=7, count=1, families=("gated_mlp",), cpu_check_mib=64))
    problem = load_problem(tmp_path / "gen" / manifest.problems[0].path)
    first = list(itertools.islice(plan(problem, "cuda"), 3))
    assert first[0].floor and first[0].bar and first[1].floor  # the tuned reference, the graph of eager
    assert first[2].group == "subgraph/gated+gemv" and "gated(" in first[2].notes  # its linears: few tokens
    assert "small_m_linear(" in first[2].notes
    assert [p.group for p in plan(problem, "cpu") if p.group.startswith("subgraph/")] == []


_INTERPRETED = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.rmsnorm.kernel import rmsnorm
from agents.offline.subgraph.families.rmsnorm.op import rms
from agents.offline.subgraph.families.gated.kernel import gated
from agents.offline.subgraph.families.gated.op import activate
torch.manual_seed(0)
x, r, w = torch.randn(3, 40), torch.randn(3, 40), torch.randn(40)
y, h = rmsnorm(x, r, w, 1e-6, 1.0, False, torch.float32)
err = {"rmsnorm": (y - rms(x + r, w, 1e-6, 1.0, False, torch.float32)).abs().max().item(),
       "residual": (h - (x + r)).abs().max().item()}
both = torch.randn(4, 2, 2 * 24)
a, b = both.chunk(2, -1)
for act in ("silu", "gelu", "gelu_tanh", "quick_gelu"):
    err[act] = (gated(a, b, act, None, torch.float32) - activate(a, act) * b).abs().max().item()
print("RESULT" + json.dumps(err))
"""


@pytest.mark.slow
def test_triton_kernels_match_their_ops_under_the_interpreter():
    err = run_interpreted(_INTERPRETED, [], timeout_s=240)
    assert max(err.values()) < 1e-4, err


_SWIGLU = """
import torch
import torch.nn.functional as F


def run(x):
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up
"""


def write_swiglu(root: Path) -> Path:
    """A problem that is one gated activation and nothing else."""
    root.mkdir(parents=True, exist_ok=True)
    definition = {
        "name": "tiny_swiglu", "op_type": "activation",
        "axes": {"T": {"type": "var"}, "I2": {"type": "const", "value": 48}, "I": {"type": "const", "value": 24}},
        "reference": _SWIGLU, "inputs": {"x": {"shape": ["T", "I2"], "dtype": "bfloat16"}},
        "outputs": {"y": {"shape": ["T", "I"], "dtype": "bfloat16"}},
    }  # fmt: skip
    (root / "definition.json").write_text(json.dumps(definition))
    rows = [{"uuid": f"w{t}", "axes": {"T": t}, "inputs": {"x": {"type": "random"}}} for t in (3, 40)]
    (root / "workload.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


def _section(text: str, family: str) -> list[str]:
    """The table rows under a family's heading of the coverage report."""
    lines = text.split(f"## {family}:", 1)[1].split("\n## ", 1)[0].splitlines()
    return [line for line in lines if line.startswith("| ") and not line.startswith("| problem")]


def test_family_coverage_reports_where_each_family_was_found(tmp_path):
    write_block(tmp_path / "set" / "block")
    write_swiglu(tmp_path / "set" / "swiglu")
    out = tmp_path / "coverage.md"
    tool = Path(__file__).resolve().parents[1] / "bench" / "family_coverage.py"
    run = subprocess.run([sys.executable, str(tool), str(tmp_path / "set"), "-o", str(out)],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    text = out.read_text()
    head = "## rmsnorm: found in 1 problems (1 inside a larger problem), 2 regions; rewritten graph matched in 1"
    assert head in text
    assert _section(text, "rmsnorm") == ["| decoderish_block | add_rmsnorm x2 | yes | match (fp32: 8 regions) |"]
    assert _section(text, "attention") == ["| decoderish_block | attention x1 | yes | match (fp32: 8 regions) |"]
    assert _section(text, "gemv") == ["| decoderish_block | small_m_linear x4 | yes | match (fp32: 8 regions) |"]
    assert _section(text, "gated") == [
        "| decoderish_block | gated x1 | yes | match (fp32: 8 regions) |",
        "| tiny_swiglu | gated x1 | no (the whole problem) | match (fp32: 1 regions; native: 1 regions) |",
    ]
    assert "## Nothing found: 0 problems" in text


def _rope_half(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _rope_interleaved(x, cos, sin):
    return x * cos + torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2) * sin


def _rope_partial(x, cos, sin):  # the first cos.shape[-1] columns rotated, the rest passed through (GPT-NeoX)
    rot = cos.shape[-1]
    return torch.cat((_rope_half(x[..., :rot], cos, sin), x[..., rot:]), dim=-1)


def _rope_pairwise(x, cos, sin, interleaved=False):  # vLLM's spelling: cos and sin one value per pair
    x1, x2 = (x[..., 0::2], x[..., 1::2]) if interleaved else x.chunk(2, dim=-1)
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    return torch.stack((o1, o2), dim=-1).flatten(-2) if interleaved else torch.cat((o1, o2), dim=-1)


def _rope_complex(x, freqs):  # Llama's original spelling: pairs as complex numbers
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs).flatten(-2).type_as(x)


def _angles(positions, rot_dim):
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot_dim, 2, dtype=torch.float32) / rot_dim))
    return positions.float()[:, None] * inv_freq[None, :]  # [s, rot_dim / 2]


def _rope_attention(spelling):
    """Causal GQA over [s, hidden] with RoPE on q and k, cos/sin (or the complex frequencies) computed from
    positions inside the graph."""

    def apply(t, positions):
        d = t.shape[-1]
        a = _angles(positions, d // 2 if "partial" in spelling else d)
        if spelling == "pairwise":
            return _rope_pairwise(t.float(), a.cos()[:, None], a.sin()[:, None]).to(t.dtype)
        if spelling == "pairwise_interleaved_partial":
            tf, rot = t.float(), d // 2
            rotated = _rope_pairwise(tf[..., :rot], a.cos()[:, None], a.sin()[:, None], interleaved=True)
            return torch.cat((rotated, tf[..., rot:]), dim=-1).to(t.dtype)
        if spelling == "complex":
            return _rope_complex(t, torch.polar(torch.ones_like(a), a)[:, None])
        emb = a.repeat_interleave(2, dim=-1) if spelling == "interleaved" else torch.cat((a, a), dim=-1)
        rope = {"half": _rope_half, "interleaved": _rope_interleaved, "partial": _rope_partial}[spelling]
        return rope(t.float(), emb.cos()[:, None], emb.sin()[:, None]).to(t.dtype)

    def f(x, wq, wk, wv, positions):
        s = x.shape[0]
        q = apply((x @ wq.t()).view(s, HEADS, HEAD_DIM), positions).transpose(0, 1)
        k = apply((x @ wk.t()).view(s, KV_HEADS, HEAD_DIM), positions).transpose(0, 1)
        v = (x @ wv.t()).view(s, KV_HEADS, HEAD_DIM).transpose(0, 1)
        group = HEADS // KV_HEADS
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        o = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
        return o.transpose(0, 1).reshape(s, HEADS * HEAD_DIM)

    return f


@pytest.mark.parametrize(
    "spelling, expected",
    [("half", "rot_dim=16, interleaved=False, pair_cos=False, out_dtype=torch.float32)"),
     ("interleaved", "rot_dim=16, interleaved=True, pair_cos=False, out_dtype=torch.float32)"),
     ("partial", "rot_dim=8, interleaved=False, pair_cos=False, out_dtype=torch.float32)"),  # of head_dim 16
     ("pairwise", "rot_dim=16, interleaved=False, pair_cos=True, out_dtype=torch.float32)"),
     ("pairwise_interleaved_partial", "rot_dim=8, interleaved=True, pair_cos=True, out_dtype=torch.float32)"),
     ("complex", "rot_dim=16, out_dtype=torch.float32)")],
)  # fmt: skip
def test_rope_on_q_and_k_inside_attention_is_replaced_and_output_matches(spelling, expected):
    f = _rope_attention(spelling)
    args = [torch.randn(7, HIDDEN), torch.randn(HEADS * HEAD_DIM, HIDDEN) * HIDDEN**-0.5,
            torch.randn(KV_HEADS * HEAD_DIM, HIDDEN) * HIDDEN**-0.5, torch.randn(KV_HEADS * HEAD_DIM, HIDDEN),
            torch.arange(3, 10)]  # fmt: skip
    want = f(*args)
    gm, replaced = rewrite(capture(f, args))
    # gemv: the q, k and v projections (fp32, 7 rows)
    assert Counter(r.family for r in replaced) == {"rope": 2, "attention": 1, "gemv": 3}, replaced
    assert [r.description.split("; ")[1] for r in replaced if r.family == "rope"] == [expected] * 2, replaced
    calls = [n for n in gm.graph.nodes if target_name(n) in ("rope", "rope_complex")]
    # q and k reach the ops as the projections' [s, heads, d] views, before the transpose
    assert [tuple(n.args[0].meta["val"].shape) for n in calls] == [(7, HEADS, HEAD_DIM), (7, KV_HEADS, HEAD_DIM)]
    ops = _ops(gm)
    assert ops["rope" if spelling != "complex" else "rope_complex"] == 2
    # the rotation is gone; cos and sin (what the ops take) are still computed in the graph
    assert not {"neg", "sub", "stack", "view_as_complex", "view_as_real"} & set(ops), ops
    assert ops["cos"] + ops["polar"] >= 1
    torch.testing.assert_close(gm(*args), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "body, expected",
    [("return _rope_half(x.float(), cos, sin).to(x.dtype)",  # x taken before .float()
      "rope(x_1, cos_1, sin_1; rot_dim=16, interleaved=False, pair_cos=False, out_dtype=torch.bfloat16)"),
     ("return _rope_interleaved(x, cos.to(x.dtype), sin.to(x.dtype))",  # in bfloat16
      "rope(x_1, _to_copy, _to_copy_1; rot_dim=16, interleaved=True, pair_cos=False, out_dtype=torch.bfloat16)"),
     ("return _rope_partial(x, cos[..., :8], sin[..., :8])",
      "rope(x_1, slice_1, slice_2; rot_dim=8, interleaved=False, pair_cos=False, out_dtype=torch.float32)"),
     ("return _rope_half(x, cos, sin) + 0.0 * y", "rope(x_1, cos_1, sin_1;"),
     ("return _rope_half(x[..., :8], cos[..., :8], sin[..., :8])",  # no pass-through: the rotated part alone
      "rope(slice_1, slice_2, slice_3; rot_dim=8"),
     ("return _rope_pairwise(x, cos[..., :8], sin[..., :8])",
      "rope(x_1, slice_1, slice_2; rot_dim=16, interleaved=False, pair_cos=True, out_dtype=torch.float32)"),
     ("return _rope_pairwise(x, cos[..., :8], sin[..., :8], interleaved=True)",
      "rope(x_1, slice_1, slice_2; rot_dim=16, interleaved=True, pair_cos=True, out_dtype=torch.float32)"),
     ("return x * cos + torch.cat((-y[..., 8:], y[..., :8]), dim=-1) * sin", None),  # y is not x
     ("return x * cos + torch.cat((x[..., 8:], -x[..., :8]), dim=-1) * sin", None),  # the other sign
     ("return x * cos + torch.cat((-x[..., :8], x[..., 8:]), dim=-1) * sin", None),  # halves not swapped
     ("return x * cos + torch.stack((-x[..., ::2], x[..., 1::2]), dim=-1).flatten(-2) * sin", None),
     ("return x * cos + torch.flip(x, [-1]) * sin", None),
     ("x1, x2 = x.chunk(2, dim=-1)\n    c, s = cos[..., :8], sin[..., :8]\n"
      "    return torch.cat((x1 * c - x2 * s, x2 * c - x1 * s), dim=-1)", None),  # pairwise, a sign off
     ("x1, x2 = x.chunk(2, dim=-1)\n    c, s = cos[..., :8], sin[..., :8]\n"
      "    return torch.cat((x1 * c - x2 * s, x2 * s + x1 * c), dim=-1)", None)],  # pairwise, cos and sin swapped
    ids=["half_widened", "interleaved_bf16", "partial", "half_beside_other_compute", "rotated_part_only",
         "pairwise_chunked", "pairwise_interleaved", "other_tensor_decoy", "wrong_sign_decoy", "not_swapped_decoy",
         "interleaved_not_swapped_decoy", "flip_decoy", "pairwise_sign_decoy", "pairwise_swapped_decoy"],
)  # fmt: skip
def test_rope_spellings_and_decoys(body, expected):
    ns: dict = {"torch": torch, "_rope_half": _rope_half, "_rope_interleaved": _rope_interleaved,
                "_rope_partial": _rope_partial, "_rope_pairwise": _rope_pairwise}  # fmt: skip
    exec(f"def f(x, y, cos, sin):\n    {body}\n", ns)
    args = [torch.randn(5, 3, 16, dtype=torch.bfloat16), torch.randn(5, 3, 16, dtype=torch.bfloat16),
            torch.randn(5, 1, 16), torch.randn(5, 1, 16)]  # fmt: skip
    gm, replaced = rewrite(capture(ns["f"], args))
    descriptions = [r.description for r in replaced]
    if expected is None:
        assert descriptions == []
    else:
        assert len(descriptions) == 1 and descriptions[0].startswith(expected), descriptions
        assert not {"neg", "sub", "cat", "stack"} & set(_ops(gm)), _ops(gm)
    torch.testing.assert_close(gm(*args), ns["f"](*args), rtol=2e-2, atol=2e-2)


_INTERPRETED_ROPE = """
import itertools, json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.rope.kernel import rope
from agents.offline.subgraph.families.rope.op import _rope, _rope_complex
torch.manual_seed(0)
x = torch.randn(5, 3, 24).transpose(0, 1)  # [heads, s, d] read through its strides
cos, sin = torch.randn(5, 1, 24).transpose(0, 1), torch.randn(5, 1, 24).transpose(0, 1)
err = {}
for rot, inter, pair in itertools.product((24, 10), (False, True), (False, True)):  # 10: masked pairs and rest
    c, s = cos[..., : rot // 2 if pair else rot], sin[..., : rot // 2 if pair else rot]
    err[f"rope_{rot}_{inter}_{pair}"] = (rope(x, c, s, rot, inter, pair, torch.float32)
                                         - _rope(x, c, s, rot, inter, pair, torch.float32)).abs().max().item()
x4 = torch.randn(2, 3, 5, 24)
freqs = torch.polar(torch.ones(3, 5, 12), torch.randn(3, 5, 12))
for rot in (24, 8):
    parts = torch.view_as_real(freqs[..., : rot // 2])
    err[f"complex_{rot}"] = (rope(x4, parts[..., 0], parts[..., 1], rot, True, True, torch.float32)
                             - _rope_complex(x4, freqs[..., : rot // 2], rot, torch.float32)).abs().max().item()
x5 = torch.randn(2, 2, 3, 5, 24)  # more than three leading dims, rounded once to bfloat16 on the store
got = rope(x5.bfloat16(), cos[0], sin[0], 24, False, False, torch.bfloat16).float()
want = _rope(x5.bfloat16(), cos[0], sin[0], 24, False, False, torch.float32)
err["bf16_in_ulps"] = ((got - want).abs() / (want.abs() * 2.0**-7 + 1e-6)).max().item()
print("RESULT" + json.dumps(err))
"""


@pytest.mark.slow
def test_rope_triton_kernel_matches_its_ops_under_the_interpreter():
    err = run_interpreted(_INTERPRETED_ROPE, [], timeout_s=240)
    # one rounding of the fp32 result, nothing more (the interpreter truncates where a GPU rounds to nearest)
    assert err.pop("bf16_in_ulps") <= 1.0, err
    assert max(err.values()) < 1e-4, err


@pytest.mark.parametrize("lead", [(), (2,)])
def test_attention_kernel_hands_sdpa_four_dimensions_so_a_fused_kernel_can_take_it(lead, monkeypatch):
    # One sequence with its heads leading, (heads, seq, dim), is how references spell prefill; SDPA's fused kernels
    # take (batch, heads, seq, dim) only and a 3-D call fell to the math kernel (56 ms against 1.5 ms on an H100).
    from agents.offline.subgraph.families.attention import kernel

    g = torch.Generator().manual_seed(0)
    q = torch.randn(*lead, 8, 33, 16, generator=g)
    k, v = (torch.randn(*lead, 2, 33, 16, generator=g) for _ in range(2))
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kw):
        seen.append([a.dim() for a in args[:3]])
        return sdpa(*args, **kw)

    monkeypatch.setattr(kernel.F, "scaled_dot_product_attention", spy)
    got = kernel.attend(q, k, v, None, 0.25, True, 0, torch.float32)
    assert seen == [[4, 4, 4]] and got.shape == q.shape
    kk, vv = (t.repeat_interleave(4, dim=-3) for t in (k, v))
    scores = (q @ kk.transpose(-2, -1) * 0.25).masked_fill(torch.ones(33, 33, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(got, torch.softmax(scores, -1) @ vv, atol=1e-5, rtol=1e-5)


def test_attention_backend_limits_sdpa_to_the_named_backend():
    from agents.offline.subgraph.families.attention.backend import run_with
    from agents.offline.subgraph.families.measure import DEFAULT

    b = torch.backends.cuda

    def allowed():
        return {n for n, on in (("math", b.math_sdp_enabled()), ("flash", b.flash_sdp_enabled()),
                                ("efficient", b.mem_efficient_sdp_enabled()), ("cudnn", b.cudnn_sdp_enabled())) if on}

    before = allowed()
    assert run_with("EFFICIENT_ATTENTION", allowed) == {"efficient"}
    assert run_with("CUDNN_ATTENTION", allowed) == {"cudnn"}
    assert run_with(DEFAULT, allowed) == before == allowed()  # untouched, and restored after each
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    with pytest.raises(RuntimeError):  # the memory-efficient kernel alone takes no CPU call
        run_with("EFFICIENT_ATTENTION", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))
