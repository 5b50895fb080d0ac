"""Flows end to end on the CPU through Prefect + Dask: a small campaign, kill -9 and resume, prefect.yaml."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from solforge.cli import cli
from solforge.prefect_env import prefect_server
from solforge.store.query import query

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = REPO / "tests" / "fixtures" / "problems"
SOLFORGE = [str(Path(sys.executable).parent / "solforge")]


def test_prefect_yaml_entrypoints_import():
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = spec["deployments"]
    assert {"nightly-campaign", "on-demand-evaluation"} <= {d["name"] for d in deployments}
    assert any(d.get("schedules") for d in deployments)
    for d in deployments:
        path, func = d["entrypoint"].split(":")
        assert path.startswith("flows/") and not Path(path).is_absolute()
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        fl = getattr(module, func)
        assert hasattr(fl, "deploy"), f"{d['entrypoint']} is not a flow"
        unknown = set(d.get("parameters", {})) - set(fl.parameters.properties)
        assert not unknown, f"{d['name']}: unknown parameters {unknown}"
        assert d["work_pool"]["name"] == "solforge-local"


@pytest.mark.parametrize("command", ["run", "sql", "serve"])
def test_help_ends_with_an_example(command):
    out = CliRunner().invoke(cli, [command, "--help"]).output
    doc = out.split("Options:")[0].rstrip()
    assert "Example:" in doc and doc.splitlines()[-1].strip().startswith("solforge ")


@pytest.fixture(scope="module")
def prefect_env(tmp_path_factory):
    """One Prefect server for the module's runs (the CLI starts its own when none is configured)."""
    with prefect_server(tmp_path_factory.mktemp("prefect")) as env:
        yield env


def _run_cmd(data: Path, run_id: str, max_candidates: int) -> list[str]:
    # --max-workloads 3: every workload of the fixture (the CPU default judges only the 2 smallest)
    return SOLFORGE + ["run", str(PROBLEMS), "--agent", "reference", "--device", "cpu", "--iterations", "2",
                       "--max-workloads", "3", "--max-candidates", str(max_candidates), "--data-dir", str(data),
                       "--run-id", run_id, "--json"]


def _env(prefect_env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | prefect_env


def _counts(data: Path, run_id: str) -> dict[str, int]:
    sql = f"""SELECT (SELECT count(*) FROM candidates WHERE run_id = '{run_id}') AS candidates,
                     (SELECT count(DISTINCT candidate_id) FROM candidates WHERE run_id = '{run_id}') AS distinct_candidates,
                     (SELECT count(*) FROM traces WHERE run_id = '{run_id}') AS traces,
                     (SELECT count(DISTINCT (candidate_id, workload_uuid)) FROM traces WHERE run_id = '{run_id}') AS distinct_traces,
                     (SELECT count(*) FROM traces WHERE run_id = '{run_id}' AND status = 'PASSED') AS passed"""
    return query(data, sql).to_pylist()[0]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_campaign_end_to_end_on_cpu(tmp_path, prefect_env):
    data = tmp_path / "data"
    t0 = time.monotonic()
    proc = subprocess.run(_run_cmd(data, "e2e", 2), env=_env(prefect_env), capture_output=True, text=True, timeout=240,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["run_id"] == "e2e" and report["problems"][0]["problem"] == "rmsnorm_small"
    assert report["problems"][0]["attempts"] == 2 and report["problems"][0]["passed"] == 2
    # the reference agent's candidates are the bare reference: judged and scored, but no result of the run
    assert report["problems"][0]["reference_only"] and report["problems"][0]["best_speedup_vs_eager"] is None
    speedups = query(data, "SELECT speedup_vs_eager FROM traces WHERE run_id = 'e2e'").column(0).to_pylist()
    assert len(speedups) == 6 and all(x is not None and x > 0 for x in speedups)
    assert _counts(data, "e2e") == {"candidates": 2, "distinct_candidates": 2, "traces": 6, "distinct_traces": 6,
                                    "passed": 6}
    decisions = query(data, "SELECT round, problem, attempts, reason FROM decisions WHERE run_id='e2e'").to_pylist()
    assert decisions and all(d["reason"] for d in decisions)
    assert query(data, "SELECT count(*) n FROM runs WHERE run_id='e2e'").to_pylist() == [{"n": 2}]
    assert (data / "views.sql").exists() and not (data / "rejected").exists()
    print(f"end-to-end run: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_kill_9_mid_run_then_resume_loses_nothing_and_doubles_nothing(tmp_path, prefect_env):
    data = tmp_path / "data"
    cmd = _run_cmd(data, "killed", 3)  # 3: the planner may stop a flat problem after 3 attempts
    proc = subprocess.Popen(cmd, env=_env(prefect_env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=REPO, start_new_session=True)
    traces_dir = data / "tables" / "traces" / "run_id=killed"
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and not list(traces_dir.glob("part-*.parquet")):
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        assert list(traces_dir.glob("part-*.parquet")), "no verdict within 180 s"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _counts(data, "killed")
    assert 1 <= before["candidates"] < 3
    resumed = subprocess.run(cmd, env=_env(prefect_env), capture_output=True, text=True, timeout=240, cwd=REPO)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = _counts(data, "killed")
    assert after == {"candidates": 3, "distinct_candidates": 3, "traces": 9, "distinct_traces": 9, "passed": 9}
    rows = query(data, "SELECT attempt, candidate_id FROM candidates WHERE run_id='killed' ORDER BY 1").to_pylist()
    assert [r["attempt"] for r in rows] == [0, 1, 2]
    # the reference agent names each proposal after the feedback it was given: every attempt saw all before it,
    # across rounds and across the restart
    names = [json.loads((data / "solutions" / "run_id=killed" / f"{r['candidate_id']}.json").read_text())["name"]
             for r in rows]
    assert names == [f"rmsnorm_small__reference_{i}" for i in range(3)]
