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


def test_variant_with_wrong_outputs_is_not_counted(monkeypatch, tmp_path):
    problem = load_problem(FIXTURE)
    real = baseline.variant_solution

    def wrong(definition, name):
        sol = real(definition, EAGER)
        if name != COMPILE_DEFAULT:
            return sol
        src = sol.sources[0].content + "\n_sol_bench_right = _sol_bench_target\n_sol_bench_target = lambda *a: _sol_bench_right(*a) * 2\n"
        return sol.model_copy(update={"name": "doubled", "sources": [sol.sources[0].model_copy(update={"content": src})]})

    monkeypatch.setattr(baseline, "variant_solution", wrong)
    r = measure_workload(problem, problem.workloads[1], load_reference(problem.definition),
                         replace(FAST, variants=(EAGER, COMPILE_DEFAULT), staging_root=tmp_path))  # fmt: skip
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


def test_each_compile_variant_is_compiled_afresh_and_the_fastest_draw_counts(monkeypatch):
    """compiles=3: the compile variant is judged three times (each a fresh worker process, its source turning
    every compile cache off), eager once; T_b keeps the fastest draw and the record lists all three in order."""
    problem = load_problem(FIXTURE)
    seen, medians = [], iter([0.5, 0.3, 0.4, 0.2])  # eager, then the compile variant's three draws

    def spy(one, solution, config):
        seen.append((solution.name.rsplit("__tb_", 1)[1], "force_disable_caches = True" in solution.sources[0].content))
        assert [w.uuid for w in one.workloads] == [problem.workloads[0].uuid]
        return {problem.workloads[0].uuid: baseline.VariantTime(next(medians), 0.01, "judge_perf_counter")}

    monkeypatch.setattr(baseline, "judge_variant", spy)
    r = measure_workload(problem, problem.workloads[0], load_reference(problem.definition),
                         replace(FAST, variants=(EAGER, COMPILE_DEFAULT), compiles=3))  # fmt: skip
    assert seen == [(EAGER, False)] + [(COMPILE_DEFAULT, True)] * 3
    assert r.compile_draws == {COMPILE_DEFAULT: [0.3, 0.4, 0.2]} and r.variants == {EAGER: 0.5, COMPILE_DEFAULT: 0.2}
    assert r.best_variant == COMPILE_DEFAULT and r.t_b_ms == 0.2
    with pytest.raises(ValueError, match="compiles must be at least 1"):
        BaselineConfig(compiles=0)


def test_a_compile_that_fails_once_leaves_its_variant_out(monkeypatch):
    from sol_bench.models import Status

    problem = load_problem(FIXTURE)
    calls = []

    def second_compile_wrong(one, solution, config):
        name = solution.name.rsplit("__tb_", 1)[1]
        calls.append(name)
        uuid = one.workloads[0].uuid
        if calls.count(COMPILE_DEFAULT) == 2:
            return {uuid: baseline.VariantFailed(Status.INCORRECT_NUMERICAL, "output 'y': 50% of elements within tolerance")}
        return {uuid: baseline.VariantTime(0.1, 0.01, "judge_perf_counter")}

    monkeypatch.setattr(baseline, "judge_variant", second_compile_wrong)
    r = measure_workload(problem, problem.workloads[0], load_reference(problem.definition),
                         replace(FAST, variants=(EAGER, COMPILE_DEFAULT), compiles=3))  # fmt: skip
    assert calls == [EAGER, COMPILE_DEFAULT, COMPILE_DEFAULT]  # no third draw after a mismatch
    assert set(r.variants) == {EAGER} and COMPILE_DEFAULT not in r.compile_draws
    assert "outputs differ from eager" in r.failed[COMPILE_DEFAULT]


def test_each_variant_is_judged_once_over_all_workloads_and_a_failing_eager_drops_its_workload(monkeypatch):
    """Variant-major: one judge call per variant covers every workload (one worker start, not one per workload);
    a workload whose eager reference fails gets no record, is named, and its other variants are not judged."""
    from sol_bench.models import Status

    problem = load_problem(FIXTURE)
    uuids = [w.uuid for w in problem.workloads]
    calls = []

    def spy(one, solution, config):
        name = solution.name.rsplit("__tb_", 1)[1]
        calls.append((name, [w.uuid for w in one.workloads]))
        if name == EAGER:
            return {u: (baseline.VariantFailed(Status.RUNTIME_ERROR, "boom") if u == uuids[1] else
                        baseline.VariantTime(0.5, 0.01, "judge_perf_counter")) for u in uuids}  # fmt: skip
        return {u: baseline.VariantTime(0.25, 0.01, "judge_perf_counter") for u in [w.uuid for w in one.workloads]}

    monkeypatch.setattr(baseline, "judge_variant", spy)
    records, refused = baseline.judge_baselines(problem, replace(FAST, variants=(EAGER, COMPILE_DEFAULT)))
    assert calls == [(EAGER, uuids), (COMPILE_DEFAULT, [uuids[0], uuids[2]])]
    assert [r.uuid for r in records] == [uuids[0], uuids[2]] and all(r.best_variant == COMPILE_DEFAULT for r in records)
    assert list(refused) == [uuids[1]] and "boom" in refused[uuids[1]]
    with pytest.raises(baseline.ReferenceFailure, match=uuids[1]):
        measure_baselines(problem, replace(FAST, variants=(EAGER, COMPILE_DEFAULT)))


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
    bad = CliRunner().invoke(cli, ["baseline", str(pdir), "--compiles", "0", "--no-save"])
    assert bad.exit_code == 2 and "--compiles" in bad.output


def test_reference_module_is_importable_by_name():
    """Dynamo (torch 2.11) imports the reference's module by name when compiling it (H200 run, 2026-11-30)."""
    import importlib

    problem = load_problem(Path(__file__).parent / "fixtures/problems/rmsnorm_small")
    ref = load_reference(problem.definition)
    assert importlib.import_module(ref.module.__name__) is ref.module
    assert ref.run.__module__ == ref.module.__name__


@pytest.mark.parametrize("device, compiles", [("cpu", 1), ("cuda", 2), ("cuda:1", 2)])
def test_baseline_cli_compiles_twice_on_cuda_by_default(monkeypatch, tmp_path, device, compiles):
    from click.testing import CliRunner

    from solforge.cli import cli

    seen = []
    monkeypatch.setattr(baseline, "measure_baselines", lambda problem, config: seen.append(config) or [])
    res = CliRunner().invoke(cli, ["baseline", str(FIXTURE), "--device", device, "--no-save", "--json"])
    assert res.exit_code == 0, res.output
    assert [c.compiles for c in seen] == [compiles]
    res = CliRunner().invoke(cli, ["baseline", str(FIXTURE), "--device", device, "--compiles", "3", "--no-save"])
    assert res.exit_code == 0 and seen[-1].compiles == 3
