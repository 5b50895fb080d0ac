"""The loader reads problems as upstream's harness does: extra workload axes and inputs are ignored, and every
real problem of the calibration set loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sol_bench.inputs import make_inputs
from sol_bench.problem import find_problems, load_problem
from sol_bench.reference import load_reference

CALIBRATION = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "sol"

DEFINITION = {
    "name": "scale_rows",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
    "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}, "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"y": {"shape": ["M", "N"], "dtype": "float32"}},
    "reference": "def run(x, alpha):\n    return x * alpha\n",
}


def _write(tmp_path: Path, workload: dict) -> Path:
    d = tmp_path / "scale_rows"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps(DEFINITION))
    (d / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    return d


def test_extra_workload_inputs_and_axes_are_ignored(tmp_path: Path) -> None:
    d = _write(tmp_path, {
        "uuid": "w0", "axes": {"M": 3, "is_joint_block": 1},
        "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 2.0},
                   "bias1": {"type": "random"}, "bias2": {"type": "random"}},
    })  # fmt: skip
    problem = load_problem(d)
    (w,) = problem.workloads
    assert w.axes == {"M": 3}
    assert set(w.inputs) == {"x", "alpha"}
    inputs = make_inputs(problem.definition, w, "cpu", seed=0, reference=load_reference(problem.definition))
    assert list(inputs) == ["x", "alpha"] and tuple(inputs["x"].shape) == (3, 8) and inputs["alpha"] == 2.0


def test_a_missing_var_axis_is_still_an_error_naming_the_line(tmp_path: Path) -> None:
    from sol_bench.errors import WorkloadError

    d = _write(tmp_path, {"uuid": "w0", "axes": {"is_joint_block": 1},
                          "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 2.0}}})  # fmt: skip
    with pytest.raises(WorkloadError) as e:
        load_problem(d)
    assert "workload.jsonl:1" in str(e.value) and "M" in str(e.value)


def test_every_calibration_problem_loads_with_all_its_published_workloads() -> None:
    dirs = find_problems(CALIBRATION)
    assert len(dirs) == 20, f"calibration set at {CALIBRATION} has {len(dirs)} problems"
    for d in dirs:
        problem = load_problem(d)
        published = {json.loads(line)["uuid"] for line in (CALIBRATION / "published_b200_sol.jsonl").open()}
        assert {w.uuid for w in problem.workloads} <= published, d.name
