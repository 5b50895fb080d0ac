"""One problem's failure is a recorded row, never the end of a run: campaign, baseline and the bench scripts."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest
from click.testing import CliRunner

from flows.campaign import load_problems
from flows.optimize import Attempt, load_states, store_prepared, store_verdict
from sol_bench.problem import load_problem
from solforge.agent_spec import AgentSpec
from solforge.cli import cli
from solforge.store import ResultStore
from solforge.store.query import query
from tasks.common import Prepared, Scored
from tasks.generate import failed, generate
from tasks.store import failure_row, store_failures

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"

# A factory for ``--agent tests_isolation_agents:make``: it raises on problems described "raise", fails a
# proposal (with a cost) on problems described "proposal", and proposes the reference elsewhere.
AGENTS = '''
from agents.base import ProposalFailed
from solforge.reference_agent import ReferenceAgent


class Flaky:
    name = "flaky"

    def propose(self, problem, history, device):
        if problem.definition.description == "raise":
            raise RuntimeError("planning exploded on " + problem.name)
        if problem.definition.description == "proposal":
            raise ProposalFailed("malformed reply", agent=self.name, language="pytorch", cost_usd=0.25,
                                 tokens_in=10, tokens_out=5)
        return ReferenceAgent(name=self.name).propose(problem, history, device)


def make(**kwargs):
    return Flaky()
'''

# Stands in for ``python -m sol_bench eval``: every first workload passes at once (the judge is not under test).
FAKE_JUDGE = '''#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
problem = Path(args[3])
name = json.loads((problem / "definition.json").read_text())["name"]
sol = json.loads(Path(args[args.index("--solution") + 1]).read_text())["name"]
w = json.loads((problem / "workload.jsonl").read_text().splitlines()[0])
ev = {{"status": "PASSED", "environment": {{"hardware": "fake"}},
      "correctness": {{"max_relative_error": 0.0, "max_absolute_error": 0.0}},
      "performance": {{"latency_ms": 0.5, "reference_latency_ms": 1.0, "speedup_factor": 2.0}}, "t_sol_ms": 0.01}}
print(json.dumps({{"definition": name, "solution": sol, "workload": w, "evaluation": ev}}))
'''


def _copy_fixture(root: Path, name: str, description: str = "", dtype: str = "bfloat16") -> Path:
    d = root / name
    d.mkdir(parents=True)
    definition = json.loads((FIXTURE / "definition.json").read_text())
    definition |= {"name": name, "description": description}
    definition["inputs"]["x"]["dtype"] = dtype
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text((FIXTURE / "workload.jsonl").read_text())
    return d


@pytest.fixture
def agents_module(tmp_path, monkeypatch) -> Path:
    mod = tmp_path / "agents_mod"
    mod.mkdir()
    (mod / "tests_isolation_agents.py").write_text(AGENTS)
    monkeypatch.syspath_prepend(str(mod))
    return mod


def test_an_agent_that_raises_is_a_final_failure_and_a_failed_proposal_is_not(tmp_path, agents_module):
    spec = AgentSpec(kind="tests_isolation_agents:make")
    boom = generate.fn(spec, str(_copy_fixture(tmp_path, "boom", "raise")), [], "cpu")
    assert boom.candidate is None and boom.failure is not None and boom.failure.final
    assert boom.failure.stage == "generate" and "RuntimeError: planning exploded on boom" in boom.failure.reason
    bad = generate.fn(spec, str(_copy_fixture(tmp_path, "bad", "proposal")), [], "cpu")
    assert bad.failure is not None and not bad.failure.final
    assert (bad.failure.cost_usd, bad.failure.tokens_in, bad.failure.agent) == (0.25, 10, "flaky")
    fine = generate.fn(spec, str(_copy_fixture(tmp_path, "fine")), [], "cpu")
    assert fine.candidate is not None and fine.failure is None


def test_invalid_problems_are_reported_with_file_and_field_and_the_rest_load(tmp_path):
    _copy_fixture(tmp_path, "good")
    _copy_fixture(tmp_path, "broken", dtype="float128")
    (tmp_path / "empty").mkdir()
    loaded, skipped = load_problems([str(tmp_path / n) for n in ("good", "broken", "empty")])
    assert [p.name for p in loaded] == ["good"]
    assert [s.path for s in skipped] == [str(tmp_path / "broken"), str(tmp_path / "empty")]
    assert "broken/definition.json: inputs.x.dtype" in skipped[0].reason
    assert "empty" in skipped[1].reason


def test_failure_rows_are_stored_once_and_a_failed_attempt_counts_on_resume(tmp_path):
    data = tmp_path / "data"
    store = ResultStore(data)
    row = failure_row("r1", "rmsnorm_small", "generate", "RuntimeError: no", attempt=1)
    assert store_failures(store, [row]).written == 1
    assert store_failures(store, [row]).skipped == 1  # a resumed run does not double it
    load = failure_row("r1", "/x/broken", "load", "definition.json: inputs.x.dtype: bad", path="/x/broken")
    assert store_failures(store, [load]).written == 1
    rows = query(data, "SELECT stage, attempt, reason FROM failures WHERE run_id = 'r1' ORDER BY stage").to_pylist()
    assert rows == [{"stage": "generate", "attempt": 1, "reason": "RuntimeError: no"},
                    {"stage": "load", "attempt": None, "reason": "definition.json: inputs.x.dtype: bad"}]
    [state] = load_states(data, "r1", [load_problem(FIXTURE)]).values()
    assert state.next_attempt == 2  # attempt 1 failed before making a candidate: the next one is 2


def _done(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


def test_a_failed_prepare_and_a_failed_judge_become_rows_not_exceptions(tmp_path):
    store = ResultStore(tmp_path / "data")
    no_candidate = failed("generate", RuntimeError("no plan"), 0.1)
    a = Attempt("c0000-x", "p", 0, _done(Prepared(no_candidate, None)), _done(Scored("c0000-x")))
    assert store_prepared(store, "r", a).failure.reason == "RuntimeError: no plan"
    b = Attempt("c0001-y", "p", 1, None, _done(Scored("c0001-y", error="JudgeInternalError: exit 3")))
    assert store_verdict(store, "r", b) is None
    crashed: Future = Future()
    crashed.set_exception(OSError("worker lost"))
    assert store_verdict(store, "r", Attempt("c0002-z", "p", 2, None, crashed)) is None
    rows = query(tmp_path / "data", "SELECT stage, attempt, candidate_id, reason FROM failures "
                                    "ORDER BY attempt").to_pylist()  # fmt: skip
    assert rows == [{"stage": "generate", "attempt": 0, "candidate_id": None, "reason": "RuntimeError: no plan"},
                    {"stage": "judge", "attempt": 1, "candidate_id": "c0001-y", "reason": "JudgeInternalError: exit 3"},
                    {"stage": "judge", "attempt": 2, "candidate_id": "c0002-z", "reason": "OSError: worker lost"}]
    assert query(tmp_path / "data", "SELECT count(*) AS n FROM candidates").to_pylist() == [{"n": 0}]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_campaign_goes_on_past_a_raising_agent_and_an_invalid_problem(tmp_path, agents_module):
    problems = tmp_path / "problems"
    for name in ("good_a", "good_b"):
        _copy_fixture(problems, name)
    _copy_fixture(problems, "boom", "raise")
    _copy_fixture(problems, "broken", dtype="float128")
    judge = tmp_path / "fake_judge"
    judge.write_text(FAKE_JUDGE.format(python=sys.executable))
    judge.chmod(0o755)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"SOLFORGE_JUDGE_PYTHON": str(judge), "SOLFORGE_JUDGE_SERVER": "0",
            "PYTHONPATH": os.pathsep.join([str(agents_module), str(REPO), env.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "solforge", "run", str(problems), "--agent", "tests_isolation_agents:make",
           "--device", "cpu", "--max-candidates", "2", "--max-workloads", "1", "--iterations", "1",
           "--data-dir", str(data), "--run-id", "iso", "--json"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=280, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "broken/definition.json: inputs.x.dtype" in proc.stderr
    assert [s["path"] for s in out["skipped_problems"]] == [str(problems / "broken")]
    # --max-candidates is per problem: two each for the good ones, whatever the others did
    per_problem = query(data, "SELECT problem, count(*) AS n FROM candidates WHERE run_id = 'iso' "
                              "GROUP BY 1 ORDER BY 1").to_pylist()  # fmt: skip
    assert per_problem == [{"problem": "good_a", "n": 2}, {"problem": "good_b", "n": 2}]
    passed = query(data, "SELECT count(*) AS n FROM traces WHERE run_id = 'iso' AND status = 'PASSED'").to_pylist()
    assert passed == [{"n": 4}]
    failures = query(data, "SELECT problem, stage, attempt, reason FROM failures WHERE run_id = 'iso' "
                           "ORDER BY stage").to_pylist()  # fmt: skip
    assert [(f["problem"], f["stage"], f["attempt"]) for f in failures] == [
        ("boom", "generate", 0), (str(problems / "broken"), "load", None)]
    assert "planning exploded on boom" in failures[0]["reason"]
    assert out["failures"] == 2
    reasons = query(data, "SELECT reason FROM decisions WHERE run_id = 'iso' AND problem = 'boom'").to_pylist()
    assert any(r["reason"].startswith("agent failed: RuntimeError") for r in reasons)
    assert out["stop_reason"]


def test_baseline_cli_skips_an_invalid_problem_and_measures_the_rest(tmp_path):
    problems = tmp_path / "problems"
    _copy_fixture(problems, "good")
    _copy_fixture(problems, "broken", dtype="float128")
    args = ["baseline", str(problems), "--device", "cpu", "--variants", "eager", "--warmup", "1", "--iterations",
            "2", "--max-workloads", "1", "--data-dir", str(tmp_path / "data"), "--json"]  # fmt: skip
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    records = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert [r["problem"] for r in records] == ["good"]
    assert "skipped:" in res.stderr and "broken/definition.json: inputs.x.dtype" in res.stderr


def _bench(name: str, monkeypatch, argv: list[str]):
    """A bench script loaded in this process (its imports are already paid for), with ``argv``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    return module


def test_measure_tb_skips_an_invalid_problem_and_measures_the_rest(tmp_path, monkeypatch, capsys):
    problems = tmp_path / "problems"
    _copy_fixture(problems, "good")
    _copy_fixture(problems, "broken", dtype="float128")
    out = tmp_path / "tb.jsonl"
    bench = _bench("measure_tb", monkeypatch, [str(problems), "--device", "cpu", "--variants", "eager", "--warmup",
                                               "1", "--iterations", "2", "--max-workloads", "1", "-o", str(out)])
    assert bench.main() == 1
    assert [json.loads(x)["problem"] for x in out.read_text().splitlines()] == ["good"]
    err = capsys.readouterr().err
    assert "skipped:" in err and "broken/definition.json: inputs.x.dtype" in err


def test_offline_bench_reports_failed_problems_in_their_rows_and_runs_the_rest(tmp_path, monkeypatch, capsys):
    problems = tmp_path / "problems"
    for name in ("a_good", "b_boom", "c_good"):
        _copy_fixture(problems, name)
    _copy_fixture(problems, "broken", dtype="float128")
    md, js = tmp_path / "t.md", tmp_path / "t.jsonl"
    # no group matches: nothing is judged, so only planning runs (the judge is not under test)
    bench = _bench("bench_offline_agents", monkeypatch, [
        str(problems), "--device", "cpu", "--max-candidates", "1", "--only-groups", "no_such_group",
        "-o", str(md), "--json-out", str(js)])  # fmt: skip
    real = bench.OfflineAgent.propose

    def propose(self, problem, history, device):
        if problem.name == "b_boom":
            raise RuntimeError("planning exploded")
        return real(self, problem, history, device)

    monkeypatch.setattr(bench.OfflineAgent, "propose", propose)
    assert bench.main() == 1
    rows = {r["problem"]: r for r in map(json.loads, js.read_text().splitlines())}
    assert set(rows) == {"a_good", "b_boom", "c_good", str(problems / "broken")}
    assert rows["a_good"] == rows["c_good"] | {"problem": "a_good"} and "error" not in rows["c_good"]
    assert rows["b_boom"]["error"] == "agent: RuntimeError: planning exploded"
    assert "inputs.x.dtype" in rows[str(problems / "broken")]["error"]
    assert "failed: agent: RuntimeError" in md.read_text()
    assert "skipped:" in capsys.readouterr().err


def test_help_says_max_candidates_is_per_problem():
    out = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "--max-candidates" in out and "per problem" in " ".join(out.split())


def test_offline_bench_records_what_the_agent_planned_but_never_offered(tmp_path, monkeypatch):
    """A candidate the precheck rejects is recorded with its reason, so a GPU run says why e.g. the subgraph
    candidate never reached the judge."""
    from agents.offline import precheck

    problems = tmp_path / "problems"
    _copy_fixture(problems, "good")
    md, js = tmp_path / "t.md", tmp_path / "t.jsonl"
    # only Inductor's C++ candidate is planned, and its precheck fails: nothing is judged
    bench = _bench("bench_offline_agents", monkeypatch, [
        str(problems), "--device", "cpu", "--max-candidates", "1", "--only-groups", "reference/inductor_cpu",
        "-o", str(md), "--json-out", str(js)])  # fmt: skip
    monkeypatch.setattr(precheck, "check", lambda *a, **k: precheck.Outcome(False, "output 0: 12% within tolerance"))
    bench.main()
    [row] = map(json.loads, js.read_text().splitlines())
    assert row["tried"] == 0 and row["skipped"] == {"ref_inductor_cpu": "numerics: output 0: 12% within tolerance"}


def test_offline_bench_records_why_a_judged_candidate_failed(tmp_path, monkeypatch):
    """A candidate the judge failed carries the judge's reasons in the record (a few, short), so a record read
    after the run (the device's log gone) still says why, e.g., a template raised at run time."""
    problems = tmp_path / "problems"
    _copy_fixture(problems, "good")
    md, js = tmp_path / "t.md", tmp_path / "t.jsonl"
    bench = _bench("bench_offline_agents", monkeypatch, [
        str(problems), "--device", "cpu", "--max-candidates", "1", "-o", str(md), "--json-out", str(js)])  # fmt: skip
    long = "RuntimeError: row too long for this template: 7168 " + "x" * 400

    def judge(problem, source, config, baselines):
        name = json.loads(source)["name"]
        return bench.Result(name, ["RUNTIME_ERROR", "RUNTIME_ERROR"], [], [], [],
                            reasons=[f"RUNTIME_ERROR: {long}", f"RUNTIME_ERROR: {long}"])  # fmt: skip

    monkeypatch.setattr(bench, "judge", judge)
    bench.main()
    [row] = map(json.loads, js.read_text().splitlines())
    [(name, why)] = row["why_failed"].items()
    assert row["passed"] == 0 and row["statuses"][name] == ["RUNTIME_ERROR"]
    assert why == [f"RUNTIME_ERROR: {long}"[:300]]  # once, cut short
