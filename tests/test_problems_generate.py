"""``solforge problems generate``: seeded, varied, valid problems; the judge passes their references; the CLI."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_bench.cli import run_validate
from sol_bench.judge import JudgeConfig, evaluate
from sol_bench.models import Status
from sol_bench.problem import find_problems, load_problem
from solforge.problems.generate import GenerateConfig, GenerateError, generate
from solforge.problems.validate import run_reference_cpu, smallest_workload

ROOT = Path(__file__).resolve().parents[1]
SEED, COUNT = 11, 44
CAP_MIB = 32  # the CPU check's cap, kept small so the whole set is checked quickly on two cores


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "set"
    manifest = generate(out, GenerateConfig(seed=SEED, count=COUNT, cpu_check_mib=CAP_MIB))
    return out, manifest


def _definitions(root: Path) -> dict[Path, dict]:
    return {p: json.loads((p / "definition.json").read_text()) for p in find_problems(root)}


def test_generated_set_validates_and_covers_the_kinds(generated):
    out, manifest = generated
    report = io.StringIO()
    assert run_validate([out], as_json=True, out=report) == 0, report.getvalue()
    assert len(report.getvalue().splitlines()) == COUNT
    defs = _definitions(out)
    names = [d["name"] for d in defs.values()]
    assert len(names) == len(set(names)) == COUNT
    assert all(n.startswith("gen_") for n in names)
    bundled = {load_problem(p).name for p in find_problems(ROOT / "data" / "problems")}
    assert not set(names) & bundled
    kinds = {t for d in defs.values() for t in d["tags"] if t.startswith("kind:")}
    assert len(kinds) >= 8, kinds
    for path, d in defs.items():
        assert path.parent.name in ("L1", "L2", "Quant") and path.name == d["name"]
        assert sum(t.startswith("kind:") for t in d["tags"]) == 1 and "generated" in d["tags"]
        assert d["provenance"]["seed"] == SEED and d["provenance"]["config"]


def test_workloads_spread_from_decode_to_prefill_and_configs_vary(generated):
    out, _ = generated
    dtypes, hidden = set(), set()
    for path in find_problems(out):
        p = load_problem(path)
        assert len(p.workloads) >= 8, p.name
        first = p.definition.var_axes()[0]
        values = sorted(w.axes[first] for w in p.workloads)
        assert values[0] <= 15 and max(max(w.axes.values()) for w in p.workloads) >= 512, (p.name, values)
        dtypes |= {s.dtype.value for s in p.definition.inputs.values()}
        cfg = json.loads((path / "definition.json").read_text())["provenance"]["config"]
        hidden.add(cfg.get("hidden"))
    assert {"bfloat16", "float16", "float32", "float8_e4m3fn"} <= dtypes
    assert len(hidden - {None}) >= 8 and any(h % 256 for h in hidden if h)


def test_manifest_lists_every_problem_and_the_rejections(generated):
    out, manifest = generated
    data = json.loads((out / "manifest.json").read_text())
    assert data["seed"] == SEED and data["count"] == COUNT
    listed = {p["path"]: p for p in data["problems"]}
    on_disk = {str(p.relative_to(out)): d for p, d in _definitions(out).items()}
    assert set(listed) == set(on_disk)
    for rel, entry in listed.items():
        assert f"kind:{entry['kinds'][0]}" in on_disk[rel]["tags"] and entry["family"]
    rejected = data["rejected"]
    assert rejected["total"] == len(rejected["samples"]) == sum(rejected["by_reason"].values())
    assert rejected["total"] == len(manifest.rejected)
    assert set(data["families"]) <= {p["family"] for p in data["problems"]}  # every family appears


def test_every_reference_runs_on_the_cpu_at_its_smallest_workload(generated):
    out, _ = generated
    for path in find_problems(out):
        p = load_problem(path)
        assert p.workload_bytes(smallest_workload(p)) <= CAP_MIB << 20
        uuid, _ = run_reference_cpu(p)
        assert uuid == smallest_workload(p).uuid


def test_the_judge_passes_generated_references(generated):
    from solforge.reference_agent import reference_solution

    out, manifest = generated
    wanted = ["decode_attention", "moe_dispatch", "rope", "linear_epilogue"]
    picks = [next(p for p in manifest.problems if p.family == f) for f in wanted]
    cfg = JudgeConfig(device="cpu", iterations=2, warmup=1, correctness_rounds=2, time_reference=False,
                      staging_root=Path(tempfile.mkdtemp(prefix="gen-judge-")))  # fmt: skip
    for pick in picks:
        p = load_problem(out / pick.path)
        p = p.select(p.smallest_workloads(1))
        [trace] = evaluate(p, reference_solution(p.definition), cfg)
        assert trace.evaluation.status is Status.PASSED, (p.name, trace.evaluation.reason, trace.evaluation.log[-800:])


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path):
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    generate(a, GenerateConfig(seed=3, count=6, cpu_check_mib=CAP_MIB))
    generate(b, GenerateConfig(seed=3, count=6, cpu_check_mib=CAP_MIB))
    generate(c, GenerateConfig(seed=4, count=6, cpu_check_mib=CAP_MIB))
    tree_a = _tree(a)
    assert tree_a == _tree(b) and len(tree_a) == 2 * 6 + 1
    names = {p.name for p in find_problems(a)}
    assert names != {p.name for p in find_problems(c)}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left


def test_bad_requests_and_a_family_that_keeps_failing_leave_nothing(tmp_path):
    with pytest.raises(GenerateError, match="unknown families"):
        generate(tmp_path / "x", GenerateConfig(seed=1, count=2, families=("nope",)))
    with pytest.raises(GenerateError, match="count"):
        generate(tmp_path / "x", GenerateConfig(seed=1, count=0))
    # A 1 MiB CPU cap rejects every decoder layer: the run fails and writes nothing.
    with pytest.raises(GenerateError, match="no valid sample"):
        generate(tmp_path / "x", GenerateConfig(seed=1, count=1, families=("decoder_layer",), cpu_check_mib=1,
                                                max_attempts=4))  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_cli_generate_exit_codes(tmp_path):
    from solforge.cli import cli

    runner = CliRunner()
    out = tmp_path / "set"
    res = runner.invoke(cli, ["problems", "generate", "--seed", "2", "--count", "3", "--families", "rope,add_norm",
                              "-o", str(out), "--cpu-check-mib", str(CAP_MIB)])  # fmt: skip
    assert res.exit_code == 0, res.output
    paths = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(paths) == 3 and all(Path(p).is_dir() for p in paths)
    families = {p["family"] for p in json.loads((out / "manifest.json").read_text())["problems"]}
    assert families == {"rope", "add_norm"}
    before = _tree(out)
    res = runner.invoke(cli, ["problems", "generate", "--seed", "2", "--count", "3", "-o", str(out)])
    assert res.exit_code == 2 and "not empty" in res.output and _tree(out) == before
    res = runner.invoke(cli, ["problems", "generate", "--seed", "2", "--count", "1", "--families", "nope", "-o",
                              str(tmp_path / "y")])  # fmt: skip
    assert res.exit_code == 2 and "unknown families" in res.output
    res = runner.invoke(cli, ["problems", "generate", "--seed", "2", "-o", str(tmp_path / "y")])
    assert res.exit_code == 2 and "--count" in res.output
    res = runner.invoke(cli, ["problems", "generate", "--seed", "2", "--count", "1", "--families", "decoder_layer",
                              "--cpu-check-mib", "1", "-o", str(tmp_path / "z")])  # fmt: skip
    assert res.exit_code == 1 and "no valid sample" in res.output and not (tmp_path / "z").exists()
    res = runner.invoke(cli, ["problems", "generate", "--list"])
    assert res.exit_code == 0 and "moe_dispatch" in res.output.split()
