"""The judge's command lines: ``solforge eval`` / ``python -m sol_bench eval`` and ``solforge problems validate``.

Both run as real subprocesses: stdout must carry trace JSON lines and nothing else, exit codes must follow
the contract (0 all PASSED, 1 some failed, 2 bad input), and bad input must write nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judge_corpus import corpus
from sol_bench.models import Status, Trace

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"
SOLUTION = REPO / "tests" / "fixtures" / "solutions" / "rmsnorm_pytorch.json"
SOLFORGE = REPO / ".venv" / "bin" / "solforge"
FAST = ["--iterations", "3", "--warmup", "1"]


def _run(argv: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ),
                          start_new_session=True)  # fmt: skip


def sol_bench_eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "sol_bench", "eval", *args, "--staging-root", str(tmp_path / "staging")],
                cwd=REPO)  # fmt: skip


def solforge(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    exe = str(SOLFORGE) if SOLFORGE.exists() else shutil.which("solforge")
    assert exe, "the solforge console script is not installed"
    return _run([exe, *args], cwd=tmp_path)  # solforge eval stages under ./kernels_tmp


def traces_of(stdout: str) -> list[Trace]:
    """Every stdout line must be one Trace; anything else on stdout fails the test."""
    lines = stdout.splitlines()
    assert all(line.strip() for line in lines), f"blank line on stdout: {stdout!r}"
    return [Trace.model_validate_json(line) for line in lines]


def wrong_solution(tmp_path: Path) -> Path:
    data = json.loads(SOLUTION.read_text())
    data["name"] = "rmsnorm_wrong"
    data["sources"][0]["content"] = "def run(x, weight, eps, y):\n    y.copy_(x * weight)\n"
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(data))
    return path


# ------------------------------------------------------------------------------------------- success


def test_sol_bench_eval_json_selected_workloads_and_output_file(tmp_path):
    out = tmp_path / "out" / "traces.jsonl"
    r = sol_bench_eval(tmp_path, str(PROBLEM), "--solution", str(SOLUTION), "--json", *FAST, "-o", str(out),
                       "--workload", "rms-7", "--workload", "rms-1")  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    traces = traces_of(r.stdout)
    assert [t.workload.uuid for t in traces] == ["rms-7", "rms-1"]
    assert all(t.evaluation.status is Status.PASSED for t in traces)
    assert all(t.definition == "rmsnorm_small" and t.solution == "rmsnorm_pytorch" for t in traces)
    assert all(t.evaluation.performance.iterations == 3 for t in traces)
    assert len({t.evaluation.seed for t in traces}) == 1 and traces[0].evaluation.seed is not None
    written = [Trace.model_validate_json(line) for line in out.read_text().splitlines()]
    assert written == traces
    assert any((tmp_path / "staging").iterdir()), "sources were not staged under --staging-root"


def test_sol_bench_eval_failing_solution_exits_1_and_max_workloads_picks_the_smallest(tmp_path):
    r = sol_bench_eval(tmp_path, str(PROBLEM), "--solution", str(wrong_solution(tmp_path)), "--json", *FAST,
                       "--max-workloads", "1")  # fmt: skip
    assert r.returncode == 1, r.stderr[-3000:]
    traces = traces_of(r.stdout)
    assert [t.workload.uuid for t in traces] == ["rms-1"]
    assert traces[0].evaluation.status is Status.INCORRECT_NUMERICAL
    assert traces[0].evaluation.correctness is not None and traces[0].evaluation.performance is None


def test_solforge_eval_json_stages_under_cwd(tmp_path):
    out = tmp_path / "t.jsonl"
    r = solforge(tmp_path, "eval", str(PROBLEM), "--solution", str(SOLUTION), "--json", *FAST,
                 "--max-workloads", "2", "-o", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    traces = traces_of(r.stdout)
    assert sorted(t.workload.uuid for t in traces) == ["rms-1", "rms-7"]
    assert all(t.evaluation.status is Status.PASSED for t in traces)
    assert [Trace.model_validate_json(x) for x in out.read_text().splitlines()] == traces
    assert (tmp_path / "kernels_tmp").is_dir() and any((tmp_path / "kernels_tmp").iterdir())


# ----------------------------------------------------------------------------------------- bad input


def _problem_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "problem"
    shutil.copytree(PROBLEM, dest)
    return dest


def _edit_definition(pdir: Path, edit) -> None:
    d = json.loads((pdir / "definition.json").read_text())
    edit(d)
    (pdir / "definition.json").write_text(json.dumps(d))


def _bad_malformed_json(tmp_path):
    sol = tmp_path / "broken.json"
    sol.write_text('{"name": "x", "definition": ')
    return PROBLEM, sol, "broken.json", "malformed JSON"


def _bad_unknown_dtype(tmp_path):
    pdir = _problem_copy(tmp_path)
    _edit_definition(pdir, lambda d: d["inputs"]["x"].update(dtype="float7_e9"))
    return pdir, SOLUTION, "definition.json", "inputs.x.dtype"


def _bad_undefined_axis(tmp_path):
    pdir = _problem_copy(tmp_path)
    _edit_definition(pdir, lambda d: d["inputs"]["x"].update(shape=["T", "Q"]))
    return pdir, SOLUTION, "definition.json", "inputs.x.shape"


def _bad_reference_without_run(tmp_path):
    pdir = _problem_copy(tmp_path)
    _edit_definition(pdir, lambda d: d.update(reference="import torch\n\ndef forward(x, weight, eps):\n    return x\n"))
    return pdir, SOLUTION, "definition.json", "reference"


def _bad_dotdot_source(tmp_path):
    data = json.loads(SOLUTION.read_text())
    data["sources"].append({"path": "../escape.py", "content": "x = 1\n"})
    sol = tmp_path / "dotdot.json"
    sol.write_text(json.dumps(data))
    return PROBLEM, sol, "dotdot.json", "sources.1.path"


def _bad_missing_blob(tmp_path):
    pdir = corpus.materialize("scale_blob", tmp_path / "problems", first_workloads=1)
    (pdir / "blobs" / "w.safetensors").unlink()
    sol = corpus.entry("honest", "scale_blob").write_solution_json(tmp_path / "scale_blob.json")
    return pdir, sol, "w.safetensors", "inputs"


BAD = {
    "malformed_json": _bad_malformed_json,
    "unknown_dtype": _bad_unknown_dtype,
    "undefined_axis": _bad_undefined_axis,
    "reference_without_run": _bad_reference_without_run,
    "dotdot_source_path": _bad_dotdot_source,
    "missing_safetensors_blob": _bad_missing_blob,
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_sol_bench_eval_bad_input_exits_2_names_file_and_field_writes_nothing(case, tmp_path):
    pdir, sol, file_part, field_part = BAD[case](tmp_path)
    out = tmp_path / "out.jsonl"
    r = sol_bench_eval(tmp_path, str(pdir), "--solution", str(sol), "--json", *FAST, "-o", str(out))
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert r.stdout == ""
    assert not out.exists()
    assert file_part in r.stderr and field_part in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("case", ["unknown_dtype", "dotdot_source_path"])
def test_solforge_eval_bad_input_exits_2(case, tmp_path):
    pdir, sol, file_part, field_part = BAD[case](tmp_path)
    out = tmp_path / "out.jsonl"
    r = solforge(tmp_path, "eval", str(pdir), "--solution", str(sol), "--json", *FAST, "-o", str(out))
    assert r.returncode == 2, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    assert r.stdout == "" and not out.exists()
    assert file_part in r.stderr and field_part in r.stderr, r.stderr


def test_missing_blob_of_a_later_workload_prints_no_trace(tmp_path):
    pdir = corpus.materialize("scale_blob", tmp_path / "problems")
    lines = (pdir / "workload.jsonl").read_text().splitlines()
    second = json.loads(lines[1])
    second["inputs"]["w"]["path"] = "blobs/missing.safetensors"
    (pdir / "workload.jsonl").write_text(lines[0] + "\n" + json.dumps(second) + "\n")
    sol = corpus.entry("honest", "scale_blob").write_solution_json(tmp_path / "scale_blob.json")
    r = sol_bench_eval(tmp_path, str(pdir), "--solution", str(sol), "--json", *FAST)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stdout == ""
    assert "workload.jsonl" in r.stderr and "inputs.w.path" in r.stderr and "missing.safetensors" in r.stderr


# ---------------------------------------------------------------------------------------- validate


def test_problems_validate_json_one_object_per_problem(tmp_path):
    root = tmp_path / "set"
    shutil.copytree(PROBLEM, root / "good" / "rmsnorm_small")
    bad = root / "bad" / "rms_bad"
    shutil.copytree(PROBLEM, bad)
    _edit_definition(bad, lambda d: d["inputs"]["x"].update(dtype="float7_e9"))
    r = solforge(tmp_path, "problems", "validate", str(root), "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(recs) == 2
    by_path = {Path(x["path"]).name: x for x in recs}
    assert {"path", "problem", "valid", "error"} <= set(by_path["rmsnorm_small"])
    assert by_path["rmsnorm_small"]["valid"] is True and by_path["rmsnorm_small"]["problem"] == "rmsnorm_small"
    assert by_path["rmsnorm_small"]["error"] is None
    assert by_path["rms_bad"]["valid"] is False and by_path["rms_bad"]["problem"] is None
    assert "definition.json" in by_path["rms_bad"]["error"] and "inputs.x.dtype" in by_path["rms_bad"]["error"]

    ok = solforge(tmp_path, "problems", "validate", str(root / "good"), "--json")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert [json.loads(line)["valid"] for line in ok.stdout.splitlines()] == [True]


# ------------------------------------------------------------------------------------ GPU suite (dry)


def test_gpu_suite_dry_run_lists_and_validates_every_solution(tmp_path):
    out = tmp_path / "suite.md"
    r = _run([sys.executable, str(REPO / "bench" / "judge_gpu_suite.py"), "--device", "cpu", "--dry-run",
              "--out", str(out), "--staging-root", str(tmp_path / "suite")], cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "0 broken" in r.stdout and "BAD " not in r.stdout
    listed = out.read_text()
    for e in corpus.entries("gpu"):
        assert f"gpu/{e.name} " in listed and "cuda" in e.expect
    for name in ("fixtures/rmsnorm_cuda_ptx", "fixtures/rmsnorm_triton", "honest/swiglu_cuda", "cheats/mutate_inputs"):
        assert name in listed
    assert "--device cpu --json --iterations 20 --warmup 3" in r.stdout
    assert {"cuda_cpp", "triton", "pytorch", "cute_dsl"} <= {lang for e in corpus.entries("gpu") for lang in e.spec["languages"]}
    refused = _run([sys.executable, str(REPO / "bench" / "judge_gpu_suite.py"), "--device", "cpu"], cwd=tmp_path)
    assert refused.returncode == 2  # expectations are for CUDA: a real run on a CPU is refused


def test_launch_preroll_option_reaches_the_judge_config_and_rejects_negatives(monkeypatch, capsys):
    from click.testing import CliRunner

    import sol_bench.cli as cli
    from solforge.cli.eval_cmd import eval_command
    from sol_bench.timing import LAUNCH_PREROLL_US

    seen = []
    monkeypatch.setattr(cli, "evaluate", lambda problem, solution, config, on_trace=None: seen.append(config) or [])
    argv = ["eval", str(PROBLEM), "--solution", str(SOLUTION)]
    assert cli._dispatch(cli.build_parser().parse_args(argv + ["--launch-preroll-us", "50"])) == 1  # no traces
    assert cli._dispatch(cli.build_parser().parse_args(argv)) == 1
    assert [c.launch_preroll_us for c in seen] == [50.0, LAUNCH_PREROLL_US]
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv + ["--launch-preroll-us", "-1"])
    assert e.value.code == 2 and ">= 0" in capsys.readouterr().err
    r = CliRunner().invoke(eval_command, argv[1:] + ["--launch-preroll-us", "7"])
    assert r.exit_code == 1 and seen[-1].launch_preroll_us == 7.0
    r = CliRunner().invoke(eval_command, argv[1:] + ["--launch-preroll-us", "-1"])
    assert r.exit_code == 2
