"""Pipeline steps through ``.fn()`` (no Prefect run needed), the judge client and the rule planner."""

from __future__ import annotations

from pathlib import Path

import pytest

from solforge.planning.types import ProblemStats
from sol_bench.models import SourceFile, Status
from sol_bench.problem import load_problem, load_solution
from solforge.judge_client import JudgeOptions, run_judge
from solforge.planning.rules import RulePlanner
from solforge.reference_agent import ReferenceAgent, reference_solution
from solforge.store.rows import candidate_id, trace_rows
from tasks.common import Generated
from tasks.compile import compile_candidate
from tasks.score import score
from tasks.verify import verify

FIXTURES = Path(__file__).parent / "fixtures"
PROBLEM = FIXTURES / "problems" / "rmsnorm_small"


@pytest.fixture(scope="module")
def problem():
    return load_problem(PROBLEM)


def test_candidate_ids_are_deterministic_and_distinct():
    assert candidate_id("r", "p", 3) == candidate_id("r", "p", 3)
    assert len({candidate_id("r", "p", i) for i in range(50)} | {candidate_id("r2", "p", 0)}) == 51


def test_syntax_error_is_a_compile_error_without_the_judge(problem):
    bad = reference_solution(problem.definition).model_copy(
        update={"sources": [SourceFile(path="kernel.py", content="def run(x, weight, eps):\n    return (\n")]}
    )
    compiled = compile_candidate.fn(bad)
    assert compiled.error and compiled.error.startswith("kernel.py:")
    judged = verify.fn(str(PROBLEM), compiled, JudgeOptions(device="cpu", python="/nonexistent/python"))
    assert [t.evaluation.status for t in judged.traces] == [Status.COMPILE_ERROR] * len(problem.workloads)
    scored = score.fn("r", "c", problem.name, compiled, judged, "cpu")
    assert [r["status"] for r in scored.rows] == ["COMPILE_ERROR"] * 3
    assert not scored.feedback.passed and scored.feedback.workloads[0].reason == compiled.error


def test_nothing_to_try_flows_through_as_none(problem):
    assert compile_candidate.fn(Generated(candidate=None, seconds=0.0, stop_reason="done")) is None
    assert verify.fn(str(PROBLEM), None, JudgeOptions()) is None
    assert score.fn("r", "c", problem.name, None, None, "cpu").rows == []


def test_judge_dying_gives_one_trace_per_workload(problem, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho '{\"not\": \"a trace\"}'\nexit 139\n")
    fake.chmod(0o755)
    run = run_judge(problem, reference_solution(problem.definition), JudgeOptions(device="cpu", python=str(fake)))
    assert run.returncode == 139
    assert sorted(t.workload.uuid for t in run.traces) == sorted(w.uuid for w in problem.workloads)
    assert all(t.evaluation.status is Status.RUNTIME_ERROR for t in run.traces)
    assert "code 139" in run.traces[0].evaluation.reason


def test_real_judge_scores_a_fixture_solution(problem):
    sol = load_solution(FIXTURES / "solutions" / "rmsnorm_pytorch.json")
    run = run_judge(problem, sol, JudgeOptions(device="cpu", timeout_s=60, extra_args=("--iterations", "3", "--warmup", "1")))
    assert [t.evaluation.status for t in run.traces] == [Status.PASSED] * 3, run.stderr_tail
    rows = trace_rows("r", "c", problem.name, run.traces, device="cpu", judge_s=run.wall_s / 3,
                      t_b_ms={"rms-1": 1000.0})
    by = {r["workload_uuid"]: r for r in rows}
    assert by["rms-1"]["t_b_ms"] == 1000.0 and by["rms-7"]["t_b_ms"] == by["rms-7"]["eager_ms"]
    for r in rows:
        assert r["speedup"] == pytest.approx(r["t_b_ms"] / r["latency_ms"])
        if r["t_sol_ms"] is not None and r["sol_score"] is not None:
            # 0 where the call came out under T_SOL: on a loaded CPU the probed roofline can be slower than
            # the call itself (flagged faster_than_sol, never a negative or a score above 1)
            assert 0 <= r["sol_score"] <= 1


def test_reference_agent_proposes_a_valid_pytorch_solution(problem):
    cand = ReferenceAgent(repeats=1).propose(problem, [], "cpu")
    assert cand.solution.spec.entry_point == "kernel.py::run" and not cand.solution.spec.destination_passing_style
    assert ReferenceAgent(repeats=0).propose(problem, [], "cpu") is None


def _stats(name, best=None, attempts=0, gain=0.0, streak=0, cost=0.0):
    return ProblemStats(name, attempts, best, None, gain, streak, cost, 0.0)


def test_planner_spends_on_headroom_and_stops_the_done_the_failing_and_the_flat():
    planner = RulePlanner()
    stats = [
        _stats("fresh"),
        _stats("half", best=0.5, attempts=2, gain=0.1),
        _stats("near", best=0.9, attempts=2, gain=0.05),
        _stats("done", best=0.99, attempts=2),
        _stats("broken", attempts=5, streak=5),
        _stats("flat", best=0.6, attempts=4, gain=0.0),
    ]
    alloc = planner.allocate(stats, slots=10)
    assert set(alloc.stopped) == {"done", "broken", "flat"}
    assert sum(alloc.attempts.values()) == 10
    assert alloc.attempts["fresh"] >= alloc.attempts["half"] > alloc.attempts["near"] >= 1
    assert all(p in alloc.reasons for p in ("fresh", "done", "broken", "flat"))
    assert "plateau" in alloc.reasons["flat"] and "in a row" in alloc.reasons["broken"]


def test_planner_with_fewer_slots_than_problems_picks_the_most_headroom():
    alloc = RulePlanner().allocate([_stats("a", best=0.8, attempts=1, gain=0.8), _stats("b")], slots=1)
    assert alloc.attempts == {"a": 0, "b": 1}


def test_planner_cost_lowers_the_share():
    alloc = RulePlanner().allocate([_stats("cheap"), _stats("dear", cost=5.0)], slots=8)
    assert alloc.attempts["cheap"] > alloc.attempts["dear"]


def test_judge_internal_error_is_raised_not_a_verdict(problem, tmp_path):
    from solforge.judge_client import JudgeInternalError

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'worker died before the candidate loaded' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(JudgeInternalError, match="exit 3"):
        run_judge(problem, reference_solution(problem.definition), JudgeOptions(device="cpu", python=str(fake)))


def test_campaign_scores_against_the_stored_t_b_of_the_same_device(tmp_path):
    from solforge.store.campaign_queries import baseline_times
    from solforge.store import ResultStore
    from tasks.benchmark import baseline_rows

    store = ResultStore(tmp_path)
    recs = [{"problem": "p", "uuid": "w1", "eager_ms": 2.0, "t_b_ms": 0.5},
            {"problem": "p", "uuid": "w2", "eager_ms": 4.0, "t_b_ms": 1.5}]
    assert store.append("baselines", baseline_rows("b1", "cpu", recs)).written == 4
    assert baseline_times(str(tmp_path), "p", "cpu") == {"w1": 0.5, "w2": 1.5}
    assert baseline_times(str(tmp_path), "p", "cuda") == {}


def test_cpu_workload_limits_pick_the_smallest_workloads_within_the_byte_cap():
    """The main job on a CPU must not try a 16k-token prefill: the judge client keeps small workloads only."""
    from pathlib import Path

    from sol_bench.problem import load_problem
    from solforge.judge_client import JudgeOptions, judge_argv, restrict

    problem = load_problem(Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small")
    assert JudgeOptions.cpu_limits("cuda") == {}
    cpu = JudgeOptions(**JudgeOptions.cpu_limits("cpu"))
    assert [w.uuid for w in restrict(problem, cpu).workloads] == ["rms-1", "rms-7"]
    # rms-64 moves 64*256*2*2 + 256*2 bytes; a cap just below it leaves the two smaller ones
    capped = JudgeOptions(max_workload_bytes=problem.workload_bytes(problem.workloads[2]) - 1)
    assert [w.uuid for w in restrict(problem, capped).workloads] == ["rms-1", "rms-7"]
    assert restrict(problem, JudgeOptions(max_workload_bytes=10)) is None
    assert restrict(problem, JudgeOptions()) is problem
    argv = judge_argv(problem.path, Path("s.json"), cpu, ["rms-1", "rms-7"])
    assert argv[argv.index("--workload") + 1] == "rms-1" and argv.count("--workload") == 2


def test_bench_workload_picks_smallest_or_spread_over_the_byte_ranking():
    """Bench runs judge N workloads per problem: the N smallest, or N spread from smallest to largest (the
    smallest are launch-bound, where every implementation takes the same couple of microseconds)."""
    from pathlib import Path

    import pytest

    from sol_bench.problem import load_problem

    fixture = load_problem(Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small")
    assert fixture.pick_workloads(2) == ["rms-1", "rms-7"]
    assert fixture.pick_workloads(2, "spread") == ["rms-1", "rms-64"]
    assert fixture.pick_workloads(1, "spread") == ["rms-7"]  # the median
    assert fixture.pick_workloads(9, "spread") == ["rms-1", "rms-7", "rms-64"]
    assert fixture.pick_workloads(0, "spread") == []
    with pytest.raises(ValueError, match="unknown workload pick"):
        fixture.pick_workloads(1, "largest")
    bundled = load_problem(Path(__file__).parents[1] / "data" / "problems" / "L1" / "softmax_v128256_fp32")
    ranked = bundled.smallest_workloads(len(bundled.workloads))
    spread = bundled.spread_workloads(3)
    assert len(spread) == 3 and spread[0] == ranked[0] and spread[-1] == ranked[-1] and spread[1] in ranked[1:-1]
    sizes = [bundled.workload_bytes(w) for w in bundled.select(spread).workloads]
    assert sizes == sorted(sizes)
