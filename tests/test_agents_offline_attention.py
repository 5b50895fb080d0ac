"""The attention template: probed bindings, and the Triton flash-attention kernel in Triton's interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agents.offline.graph import trace_ops
from agents.offline.templates import attention
from sol_bench.problem import load_problem

_SDPA = "import torch\nimport torch.nn.functional as F\n\ndef run(q, k, v):\n"
# name -> (q shape, kv shape, out shape, dtype, reference body, var axes, expected binding consts)
CASES = {
    "sdpa_plain": (["B", "H", "S", "D"], ["B", "H", "S", "D"], "float16",
                   "    return F.scaled_dot_product_attention(q, k, v)\n",
                   {"B": 2, "H": 2, "S": 37, "D": 16},
                   {"layout": "bhsd", "causal": False, "gqa": "interleave"}),
    "sdpa_causal_gqa": (["B", "H", "S", "D"], ["B", "HK", "S", "D"], "bfloat16",
                        "    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\n",
                        {"B": 1, "H": 4, "HK": 2, "S": 45, "D": 32},
                        {"layout": "bhsd", "causal": "top_left", "gqa": "interleave"}),
    "explicit_bshd_tiled_gqa": (["B", "S", "H", "D"], ["B", "S", "HK", "D"], "bfloat16",
                                "    g = q.shape[2] // k.shape[2]\n"
                                "    q, k, v = (t.transpose(1, 2) for t in (q, k, v))\n"
                                "    k, v = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)\n"
                                "    s = (q @ k.transpose(-1, -2)).float() * 0.125\n"
                                "    return (torch.softmax(s, -1).to(q.dtype) @ v).transpose(1, 2)\n",
                                {"B": 2, "H": 6, "HK": 2, "S": 21, "D": 16},
                                {"layout": "bshd", "causal": False, "gqa": "tile", "scale": 0.125}),
    "causal_bottom_right": (["B", "H", "S", "D"], ["B", "H", "L", "D"], "float16",
                            "    sq, skv = q.shape[-2], k.shape[-2]\n"
                            "    mask = torch.ones(sq, skv, dtype=torch.bool, device=q.device).tril(skv - sq)\n"
                            "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n",
                            {"B": 1, "H": 2, "S": 19, "L": 70, "D": 16},
                            {"layout": "bhsd", "causal": "bottom_right", "gqa": "interleave"}),
    "decode_gqa_split": (["B", "H", "D"], ["B", "HK", "L", "D"], "bfloat16",
                         "    g = q.shape[1] // k.shape[1]\n"
                         "    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)\n"
                         "    s = (q.unsqueeze(2) @ k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5\n"
                         "    return (torch.softmax(s, -1).to(q.dtype) @ v).squeeze(2)\n",
                         {"B": 2, "H": 4, "HK": 2, "L": 301, "D": 64},
                         {"layout": "bhd", "causal": False, "gqa": "interleave"}),
}  # fmt: skip


def write_case(root: Path, name: str) -> Path:
    qs, kvs, dtype, body, axes, _ = CASES[name]
    var = {"S", "L", "B"}
    d = root / name
    d.mkdir(parents=True)
    definition = {
        "name": name, "reference": _SDPA + body,
        "axes": {a: ({"type": "var"} if a in var else {"type": "const", "value": n}) for a, n in axes.items()},
        "inputs": {"q": {"shape": qs, "dtype": dtype}, "k": {"shape": kvs, "dtype": dtype},
                   "v": {"shape": kvs, "dtype": dtype}},
        "outputs": {"o": {"shape": qs, "dtype": dtype}},
    }  # fmt: skip
    (d / "definition.json").write_text(json.dumps(definition))
    wl = {"uuid": f"{name}-1", "axes": {a: n for a, n in axes.items() if a in var},
          "inputs": {k: {"type": "random"} for k in "qkv"}, "tolerance": {"max_atol": 2e-2, "max_rtol": 2e-2}}  # fmt: skip
    (d / "workload.jsonl").write_text(json.dumps(wl) + "\n")
    return d


@pytest.mark.parametrize("name", sorted(CASES))
def test_probe_binds_exactly_the_reference_semantics(tmp_path, name):
    p = load_problem(write_case(tmp_path, name))
    bindings = attention.match_attention(p, trace_ops(p))
    assert len(bindings) == 1, [dict(b.consts) for b in bindings]
    got, want = dict(bindings[0].consts), CASES[name][-1]
    assert {k: got[k] for k in want} == want
    if "scale" not in want:
        assert got["scale"] == pytest.approx(CASES[name][4]["D"] ** -0.5)


def test_no_binding_for_a_reference_that_is_not_plain_attention(tmp_path):
    name = "sdpa_plain"
    d = write_case(tmp_path, name)
    spec = json.loads((d / "definition.json").read_text())
    spec["reference"] = _SDPA + "    return F.scaled_dot_product_attention(q, k, v) * 1.5\n"
    (d / "definition.json").write_text(json.dumps(spec))
    p = load_problem(d)
    assert attention.match_attention(p, trace_ops(p)) == []


_INTERPRET_SCRIPT = r"""
import json, sys, pathlib, tempfile
sys.path.insert(0, sys.argv[1])
from tests.test_agents_offline_attention import write_case
from tests.offline_problems import run_solution_here
from agents.offline.graph import trace_ops
from agents.offline.templates import attention, build_solution
from sol_bench.problem import load_problem
root = pathlib.Path(tempfile.mkdtemp())
r = next(r for r in attention.ATTENTION.renderers if r.language == "triton")
ok = {}
for name in json.loads(sys.argv[2]):
    p = load_problem(write_case(root, name))
    (b,) = attention.match_attention(p, trace_ops(p))
    good = []
    for params in ({"block_m": 16, "block_n": 16, "num_warps": 4, "num_stages": 2, "split": "off"},
                   {"block_m": 32, "block_n": 32, "num_warps": 4, "num_stages": 2, "split": "auto"}):
        sol = build_solution(p, "attention", r, b, params)
        try:
            run_solution_here(p, sol)
            good.append(params["split"])
        except AssertionError as e:
            print(name, params, "failed:", str(e)[:300])
    ok[name] = good
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_triton_attention_matches_the_reference_in_the_interpreter():
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    names = sorted(CASES)
    result = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=600)
    assert result == {n: ["off", "auto"] for n in names}, result
