"""T_SOL against the leaderboard's method: routed MoE weights, the calibration set's agreement, bundled problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sol_bench.models import Definition, Workload
from sol_bench.problem import find_problems, load_problem
from sol_bench.reference import load_reference
from sol_bench.sol import SolAnalysisError, analyze_workload
from sol_bench.sol.hardware import B200, H200

REPO = Path(__file__).resolve().parents[1]
MIXTRAL = REPO / "data/problems/L2/moe_layer_h4096_i14336_e8_k2_renorm_bf16"
CALIBRATION = Path("/work/shared/calibration/sol")

# Share of the calibration subsample (below) within ±5% / ±10% of the published B200 T_SOL, as measured
# when the model last changed; the live value must not fall below it.
CALIBRATION_FLOOR_5 = 0.52
CALIBRATION_FLOOR_10 = 0.58

GROUPED_MOE = """
import torch

def make_inputs(axes, device):
    g = torch.Generator(device="cpu").manual_seed(axes["T"])
    T, D, I, E = axes["T"], axes["D"], axes["I"], axes["E"]
    return {"x": torch.randn(T, D, generator=g).to(device, torch.bfloat16),
            "router": torch.randn(E, D, generator=g).to(device, torch.bfloat16),
            "w": torch.randn(E, I, D, generator=g).to(device, torch.bfloat16)}

def run(x, router, w):
    ids = torch.topk(x.float() @ router.float().t(), 2, dim=-1).indices.reshape(-1)
    order = torch.argsort(ids, stable=True)
    counts = (ids[:, None] == torch.arange(w.shape[0], device=x.device)[None, :]).sum(0)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    return torch._grouped_mm(x[order // 2], w.transpose(-2, -1), offs=offs)
"""


def _grouped_moe(tokens: int) -> tuple[Definition, Workload]:
    d = Definition.model_validate({
        "name": "grouped_moe",
        "axes": {"T": {"type": "var"}, "D": {"type": "const", "value": 64}, "I": {"type": "const", "value": 32},
                 "E": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["T", "D"], "dtype": "bfloat16"}, "router": {"shape": ["E", "D"], "dtype": "bfloat16"},
                   "w": {"shape": ["E", "I", "D"], "dtype": "bfloat16"}},
        "outputs": {"y": {"shape": [str(2 * tokens), "I"], "dtype": "bfloat16"}},
        "reference": GROUPED_MOE,
        "custom_inputs_entrypoint": "make_inputs",
    })  # fmt: skip
    w = Workload.model_validate(
        {"uuid": f"t{tokens}", "axes": {"T": tokens}, "inputs": {n: {"type": "custom"} for n in ("x", "router", "w")}}
    )
    return d, w


def test_mixtral_at_one_token_reads_only_its_two_routed_experts():
    problem = load_problem(MIXTRAL)
    one = next(w for w in problem.workloads if w.axes["T"] == 1)
    r = analyze_workload(problem.definition, one, H200, real_device=None)  # meta: no 2.8 GB of weights made
    expert = 14336 * 4096 * 2  # one expert's [I, H] bf16 matrix
    for name in ("w_gate", "w_up", "w_down"):
        assert r.input_bytes[name] == 2 * expert
    assert r.bytes < 3 * 2 * expert + 100_000
    assert r.t_sol_ms == pytest.approx(r.bytes / 4.8e12 * 1e3)
    assert 0.14 < r.t_sol_ms < 0.15  # two experts at 4.8 TB/s, not all eight (~0.59 ms)


@pytest.mark.parametrize("tokens", [1, 3, 40])
def test_grouped_moe_counts_the_experts_the_routing_selects(tokens):
    d, w = _grouped_moe(tokens)
    r = analyze_workload(d, w, B200)
    assert r.method == "real"
    # The routing, recomputed here from the same inputs, decides which experts' rows are read.
    ref = load_reference(d)
    inputs = ref.module.make_inputs({"T": tokens, "D": 64, "I": 32, "E": 16}, "cpu")
    hit = torch.topk(inputs["x"].float() @ inputs["router"].float().t(), 2, dim=-1).indices.unique().numel()
    assert r.input_bytes["w"] == hit * 32 * 64 * 2
    assert r.macs == 2 * tokens * 64 * 32 + tokens * 64 * 16  # experts + router
    if tokens == 1:
        assert hit == 2
    meta = analyze_workload(d, w, B200, real_device=None)
    assert meta.method == "meta"
    assert meta.input_bytes["w"] == min(16, 2 * tokens) * 32 * 64 * 2  # the bound: no more experts than rows
    assert meta.input_bytes["w"] >= r.input_bytes["w"]


def _calibration_sample() -> list[tuple[Path, str, float]]:
    published = {}
    for line in (CALIBRATION / "published_b200_sol.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            published[rec["uuid"]] = float(rec["b200_sol_ms"])
    sample = []
    for d in find_problems(CALIBRATION):
        uuids = [json.loads(x)["uuid"] for x in (d / "workload.jsonl").read_text().splitlines() if x.strip()]
        sample += [(d, u, published[u]) for u in uuids[::5] if u in published]
    return sample


@pytest.mark.skipif(not (CALIBRATION / "published_b200_sol.jsonl").is_file(), reason="calibration set not here")
def test_calibration_agreement_does_not_regress():
    sample = _calibration_sample()
    assert len(sample) >= 60
    near = wide = 0
    problems = {}
    for d, uuid, published_ms in sample:
        problem = problems.get(d) or problems.setdefault(d, load_problem(d))
        w = next(w for w in problem.workloads if w.uuid == uuid)
        try:
            r = analyze_workload(problem.definition, w, B200, real_cap_bytes=256 << 20)
        except SolAnalysisError as e:
            assert problem.name in str(e) and uuid in str(e)  # a gap always says which workload and why
            continue
        err = abs(r.t_sol_ms / published_ms - 1)
        near += err <= 0.05
        wide += err <= 0.10
    assert near / len(sample) >= CALIBRATION_FLOOR_5, f"{near}/{len(sample)} within 5%"
    assert wide / len(sample) >= CALIBRATION_FLOOR_10, f"{wide}/{len(sample)} within 10%"


def test_every_bundled_problem_gets_a_value_or_a_reason():
    dirs = find_problems(REPO / "data/problems")
    assert len(dirs) >= 50
    analysed = 0
    for d in dirs:
        problem = load_problem(d)
        reference = load_reference(problem.definition)
        for w in problem.workloads:
            try:
                r = analyze_workload(problem.definition, w, B200, reference=reference, real_cap_bytes=64 << 20)
            except SolAnalysisError as e:
                assert problem.name in str(e) and w.uuid in str(e) and "(" in str(e)
                continue
            assert r.t_sol_ms > 0 and r.bytes > 0
            analysed += 1
    assert analysed >= 500
