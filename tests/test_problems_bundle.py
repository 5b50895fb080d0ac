"""The bundled set in data/problems: what the script regenerates, coverage, and one problem per family runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_bench.problem import find_problems, load_problem
from solforge.problems.bundle import build_bundle
from solforge.problems.validate import run_reference_cpu, sol_times

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "data" / "problems"

# One cheap problem per family (and the fp8 quant category): each must load and its reference run on the CPU.
ONE_PER_FAMILY = {
    "dense_llm": "L1/rmsnorm_fwd_h896_eps6_bf16",
    "moe_llm": "L1/moe_grouped_sigmoid_topk_e256_k8_g8_tg4",
    "vision": "L2/encoder_attention_h768_heads12_n197_bf16",
    "audio": "L1/layernorm_fwd_h1280_eps5_tok1500_bf16",
    "diffusion": "L2/dit_block_h1152_heads16_f4608_n256_bf16",
    "multimodal": "L2/mlp_gelu_exact_k1024_i4096_n4096_tok576_bf16",
    "quant": "Quant/fp8_blockscale_gemm_k7168_n2048_b128",
}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_bundled_set_is_what_the_script_regenerates(tmp_path):
    build_bundle(tmp_path / "problems")
    fresh, shipped = _tree(tmp_path / "problems"), _tree(BUNDLED)
    assert sorted(fresh) == sorted(shipped), "data/problems is stale: run scripts/build_bundled_problems.py"
    stale = [k for k in fresh if fresh[k] != shipped[k]]
    assert not stale, f"regenerate data/problems (scripts/build_bundled_problems.py): {stale[:5]}"


def test_bundled_set_covers_the_families():
    paths = find_problems(BUNDLED)
    assert len(paths) >= 40
    archs, families, levels = set(), set(), set()
    for p in paths:
        prov = json.loads((p / "definition.json").read_text())["provenance"]
        levels.add(prov["level"])
        for s in prov["sources"]:
            archs.add(s["arch"])
            families.add(s["family"])
            assert s["module"] and s["config"]
    assert len(archs) >= 12
    assert families == {"dense_llm", "moe_llm", "vision", "audio", "diffusion", "multimodal"}
    assert levels == {"L1", "L2"}
    assert any(p.parent.name == "Quant" for p in paths)
    assert all(sum(f.stat().st_size for f in p.iterdir()) < 32_000 for p in paths)


@pytest.mark.parametrize("family", sorted(ONE_PER_FAMILY))
def test_one_problem_per_family_runs_on_the_cpu(family):
    problem = load_problem(BUNDLED / ONE_PER_FAMILY[family])
    uuid, _ = run_reference_cpu(problem)
    assert uuid in {w.uuid for w in problem.workloads}
    times = sol_times(problem)
    if times is not None:
        assert all(t > 0 for t in times)
