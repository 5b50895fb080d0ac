"""Kernel families found inside composite references (``agents/offline/subgraph``): each family is found where
it occurs, decoys that look alike are left alone, and the rewritten graph computes what the reference does."""

from __future__ import annotations

import importlib.util
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
from sol_bench.inputs import make_inputs, output_specs
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
    assert kinds == {"add_rmsnorm": 2, "attention": 1, "gated": 1}, replaced
    attention = next(r.description for r in replaced if r.family == "attention")
    assert "causal=True" in attention and "mask_mode=0" in attention  # the constant tril mask read as causal
    ops = _ops(gm)
    assert ops["_softmax"] == 0 and ops["rsqrt"] == 1 and ops["sigmoid"] == 1  # decoys stay as they were
    assert ops["add_rmsnorm"] == 2 and ops["attention"] == 1 and ops["gated"] == 1
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
        "scale=0.125, causal=False, mask_mode=1, out_dtype=torch.float32)"
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


def test_candidate_ships_package_files_and_runs_on_the_cpu(block, tmp_path):
    found = subgraph_solution.find(block)
    assert found.families == ("attention", "gated", "rmsnorm")
    sol = subgraph_solution.solution(block, found)
    here = Path(subgraph_solution.__file__).parent
    shipped = {s.path: s.content for s in sol.sources if s.path != "kernel.py"}
    assert "sf_subgraph/families/rmsnorm/kernel.py" in shipped and "sf_subgraph/solution.py" not in shipped
    for path, text in shipped.items():
        assert (here / path.removeprefix("sf_subgraph/")).read_text() == text  # the package's own files
    for s in sol.sources:
        (tmp_path / s.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / s.path).write_text(s.content)
    sys.path.append(str(tmp_path))
    try:
        spec = importlib.util.spec_from_file_location("subgraph_candidate", tmp_path / "kernel.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        ref = load_reference(block.definition)
        for w in block.workloads:
            inputs = list(make_inputs(block.definition, w, "cpu", seed=5, reference=ref).values())
            outs = [torch.empty(shape, dtype=dt) for shape, dt in output_specs(block.definition, w).values()]
            module.solforge_entry(*inputs, *outs)
            for got, want in zip(outs, ref.run(*inputs)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert all(len(r) == 4 for r in module._runner.replaced.values())  # found again at run time, per signature
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "sf_subgraph" or m.startswith("sf_subgraph.")]:
            del sys.modules[name]


def test_errors_inside_find_or_rendering_leave_the_plan_without_the_candidate(block, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a matcher's bug")

    def groups() -> list[str]:
        return [p.group for p in plan(block, "cuda", "triton") if p.group.startswith("subgraph/")]

    assert groups() == ["subgraph/attention+gated+rmsnorm"]  # before anything breaks
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
    first = list(itertools.islice(plan(problem, "cuda"), 2))
    assert first[0].floor
    assert first[1].group == "subgraph/gated" and "gated(" in first[1].notes
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
    assert _section(text, "rmsnorm") == ["| decoderish_block | add_rmsnorm x2 | yes | match (fp32: 4 regions) |"]
    assert _section(text, "attention") == ["| decoderish_block | attention x1 | yes | match (fp32: 4 regions) |"]
    assert _section(text, "gated") == [
        "| decoderish_block | gated x1 | yes | match (fp32: 4 regions) |",
        "| tiny_swiglu | gated x1 | no (the whole problem) | match (fp32: 1 regions; native: 1 regions) |",
    ]
    assert "## Nothing found: 0 problems" in text
