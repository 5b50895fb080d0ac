"""Mixed tracing: data-dependent routing of workloads whose inputs exceed the real-execution cap."""

from __future__ import annotations

import pytest

from sol_bench.models import Definition, Workload
from sol_bench.sol import SolAnalysisError, analyze_workload
from sol_bench.sol import analyze as sol_analyze
from sol_bench.sol.hardware import B200

E, K, D, I = 8, 2, 64, 32  # experts, experts per token, hidden, expert width
EXPERT_BYTES = I * D * 2  # one expert's [I, D] bf16 matrix

# Top-k routing with a Python loop over the experts hit (``.item()``, ``torch.where``), as in HF MoE layers.
LOOP_MOE = """
import torch

def run(x, router, w_up, w_down):
    logits = x.float() @ router.float().t()
    weights, chosen = torch.topk(torch.softmax(logits, dim=-1), %d, dim=-1)
    out = torch.zeros_like(x)
    mask = torch.nn.functional.one_hot(chosen, num_classes=router.shape[0]).permute(2, 1, 0)
    for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().squeeze(-1):
        slot, tok = torch.where(mask[e.item()])
        h = torch.relu(x[tok] @ w_up[e.item()].t()) @ w_down[e.item()].t()
        out.index_add_(0, tok, h * weights[tok, slot, None].to(h.dtype))
    return out
""" % K


def _loop_moe(tokens: int) -> tuple[Definition, Workload]:
    d = Definition.model_validate({
        "name": "loop_moe",
        "axes": {"T": {"type": "var"}, "D": {"type": "const", "value": D}, "I": {"type": "const", "value": I},
                 "E": {"type": "const", "value": E}},
        "inputs": {"x": {"shape": ["T", "D"], "dtype": "bfloat16"}, "router": {"shape": ["E", "D"], "dtype": "bfloat16"},
                   "w_up": {"shape": ["E", "I", "D"], "dtype": "bfloat16"},
                   "w_down": {"shape": ["E", "D", "I"], "dtype": "bfloat16"}},
        "outputs": {"y": {"shape": ["T", "D"], "dtype": "bfloat16"}},
        "reference": LOOP_MOE,
    })  # fmt: skip
    return d, Workload.model_validate({"uuid": f"t{tokens}", "axes": {"T": tokens}, "inputs": {}})


# Experts' weights (2 x 32 KiB) are above a quarter of this cap, the tokens and the router below it.
SMALL_CAP = 48 << 10


@pytest.mark.parametrize("tokens", [1, 5])
def test_mixed_trace_counts_what_the_real_trace_counts_when_the_routing_inputs_are_real(tokens):
    d, w = _loop_moe(tokens)
    real = analyze_workload(d, w, B200)
    mixed = analyze_workload(d, w, B200, real_cap_bytes=SMALL_CAP)
    assert (real.method, mixed.method) == ("real", "mixed")
    assert mixed.input_bytes == real.input_bytes
    assert (mixed.macs, mixed.bytes) == (real.macs, real.bytes)
    hit = real.input_bytes["w_up"] // EXPERT_BYTES
    assert K <= hit <= min(E, K * tokens)
    assert real.input_bytes["w_down"] == hit * EXPERT_BYTES
    assert real.macs == tokens * D * E + tokens * K * 2 * D * I  # router + each token's K experts


@pytest.mark.parametrize(("tokens", "hit"), [(1, K), (64, E)])
def test_routing_on_stand_in_logits_selects_the_experts_random_inputs_select(monkeypatch, tokens, hit):
    # Every matmul above 0 MACs runs on meta: the router logits are seeded random stand-ins.
    monkeypatch.setattr(sol_analyze, "MIXED_MAX_MACS", 0)
    d, w = _loop_moe(tokens)
    r = analyze_workload(d, w, B200, real_cap_bytes=SMALL_CAP)
    assert r.method == "mixed"
    # One token reads its K experts; 64 tokens routed at random hit all 8 (a miss has odds (6/8)^64 ~ 1e-8).
    assert r.input_bytes["w_up"] == r.input_bytes["w_down"] == hit * EXPERT_BYTES
    assert r.macs == tokens * D * E + tokens * K * 2 * D * I


def test_an_index_read_from_a_bulky_input_is_a_reason_not_a_guess():
    d = Definition.model_validate({
        "name": "argmax_row",
        "axes": {"R": {"type": "const", "value": 256}, "C": {"type": "const", "value": 64}},
        "inputs": {"w": {"shape": ["R", "C"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["1", "C"], "dtype": "float32"}},
        "reference": "import torch\ndef run(w):\n    i = int(w.argmax().item()) // w.shape[1]\n    return w[i:i + 1] * 2\n",
    })  # fmt: skip
    w = Workload.model_validate({"uuid": "a", "axes": {}, "inputs": {}})
    assert analyze_workload(d, w, B200).method == "real"
    with pytest.raises(SolAnalysisError, match=r"argmax_row/a: .*cap.*mixed trace failed.*meta"):
        analyze_workload(d, w, B200, real_cap_bytes=16 << 10)
