"""Baselines on the CPU for the fixture problem: variants, the correctness gate and the JSON store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sol_bench import baseline
from sol_bench.baseline import (
    COMPILE_DEFAULT,
    EAGER,
    BaselineConfig,
    baseline_path,
    load_baselines,
    measure_baselines,
    measure_workload,
    save_baselines,
)
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference

FIXTURE = Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small"
FAST = BaselineConfig(device="cpu", variants=(EAGER,), warmup=1, iterations=3)


def test_eager_baseline_roundtrip(tmp_path):
    problem = load_problem(FIXTURE)
    records = measure_baselines(problem, FAST)
    assert [r.uuid for r in records] == ["rms-1", "rms-7", "rms-64"]
    for r in records:
        assert r.best_variant == EAGER and r.t_b_ms == r.eager_ms > 0
        assert set(r.variants) == {EAGER} and r.device_name.startswith("cpu")
    path = save_baselines(tmp_path, records)
    assert path == baseline_path(tmp_path, "rmsnorm_small", records[0].device_name)
    assert path.name == "rmsnorm_small.json" and path.parent.parent.name == "baselines"
    assert [p.name for p in path.parent.iterdir()] == ["rmsnorm_small.json"]  # no temp file left
    loaded = load_baselines(tmp_path, "rmsnorm_small", records[0].device_name)
    assert loaded["rms-64"] == records[2]
    assert load_baselines(tmp_path, "rmsnorm_small", "NVIDIA H200") == {}


def test_cpu_drops_cuda_graph_variants_and_rejects_unknown():
    assert BaselineConfig(device="cpu").chosen_variants() == (EAGER, COMPILE_DEFAULT)
    assert BaselineConfig(device="cpu", variants=("cudagraph-eager",)).chosen_variants() == (EAGER,)
    with pytest.raises(ValueError, match="unknown baseline variants"):
        BaselineConfig(variants=("fast",)).chosen_variants()


def test_variant_with_wrong_outputs_is_not_counted(monkeypatch):
    problem = load_problem(FIXTURE)
    real = baseline._variant_callable

    def wrong(name, run, inputs, device):
        fn = real(EAGER, run, inputs, device)
        return (lambda: fn() * 2) if name == COMPILE_DEFAULT else fn

    monkeypatch.setattr(baseline, "_variant_callable", wrong)
    r = measure_workload(problem, problem.workloads[1], load_reference(problem.definition),
                         replace(FAST, variants=(EAGER, COMPILE_DEFAULT)))  # fmt: skip
    assert set(r.variants) == {EAGER}
    assert "outputs differ from eager" in r.failed[COMPILE_DEFAULT]


@pytest.mark.slow
def test_torch_compile_variant_on_cpu():
    problem = load_problem(FIXTURE)
    config = BaselineConfig(device="cpu", warmup=2, iterations=5)
    r = measure_workload(problem, problem.workloads[0], load_reference(problem.definition), config)
    assert set(r.variants) | set(r.failed) == {EAGER, COMPILE_DEFAULT}
    assert r.t_b_ms == min(r.variants.values())
    assert r.variants[r.best_variant] == r.t_b_ms


def test_baseline_cli_max_workloads_times_only_the_smallest(tmp_path):
    import json

    from click.testing import CliRunner

    from sol_bench.problem import load_problem
    from solforge.cli import cli

    pdir = Path(__file__).parent / "fixtures/problems/rmsnorm_small"
    problem = load_problem(pdir)
    assert len(problem.workloads) > 1
    res = CliRunner().invoke(cli, ["baseline", str(pdir), "--variants", "eager", "--warmup", "1", "--iterations", "2",
                                   "--max-workloads", "1", "--no-save", "--json", "--data-dir", str(tmp_path)])  # fmt: skip
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    smallest = min(problem.workloads, key=problem.workload_bytes)
    assert [r["uuid"] for r in records] == [smallest.uuid]


def test_reference_module_is_importable_by_name():
    """Dynamo (torch 2.11) imports the reference's module by name when compiling it (H200 run, 2026-11-30)."""
    import importlib

    problem = load_problem(Path(__file__).parent / "fixtures/problems/rmsnorm_small")
    ref = load_reference(problem.definition)
    assert importlib.import_module(ref.module.__name__) is ref.module
    assert ref.run.__module__ == ref.module.__name__
