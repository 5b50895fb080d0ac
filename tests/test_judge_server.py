"""The long-lived judge (``python -m sol_bench serve``) and the pipeline's client for it."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from sol_bench.cli import SERVE_DONE, build_parser, run_serve
from sol_bench.models import Status
from sol_bench.problem import load_problem, load_solution
from solforge.judge_client import JudgeOptions, run_judge
from solforge.judge_server import JudgeServer, JudgeServers, ServerOverran

REPO = Path(__file__).resolve().parents[1]
PROBLEM = REPO / "tests/fixtures/problems/rmsnorm_small"
SOLUTION = REPO / "tests/fixtures/solutions/rmsnorm_pytorch.json"
FAST = ["--device", "cpu", "--json", "--iterations", "3", "--warmup", "1", "--max-workloads", "1"]


def _request(*extra: str) -> list[str]:
    return [str(PROBLEM), "--solution", str(SOLUTION), *FAST, *extra]


def test_serve_answers_each_request_then_a_done_line():
    requests = io.StringIO("\n".join([json.dumps(_request()), "not json", json.dumps(["--help"]),
                                      json.dumps(_request())]) + "\n")  # fmt: skip
    out = io.StringIO()
    assert run_serve(build_parser(), requests, out) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    done = [i for i, rec in enumerate(lines) if SERVE_DONE in rec]
    assert [lines[i]["exit"] for i in done] == [0, 2, 2, 0]
    traces = [rec for rec in lines if SERVE_DONE not in rec]
    assert len(traces) == 2 and all(t["evaluation"]["status"] == "PASSED" for t in traces)
    assert done[0] == 1 and done[3] == len(lines) - 1  # each request's traces come before its done line


def test_serve_stops_after_a_judge_error(monkeypatch):
    from sol_bench import cli
    from sol_bench.errors import JudgeError

    def broken(*a, **k):
        raise JudgeError("the judge's own failure")

    monkeypatch.setattr(cli, "run_eval", broken)
    requests = io.StringIO(json.dumps(_request()) + "\n" + json.dumps(_request()) + "\n")
    out = io.StringIO()
    assert run_serve(build_parser(), requests, out) == 3
    assert [json.loads(line)["exit"] for line in out.getvalue().splitlines()] == [3]  # the second is never read


def test_one_server_process_judges_many_candidates():
    servers = JudgeServers()
    try:
        problem = load_problem(PROBLEM)
        sol = load_solution(SOLUTION)
        opts = JudgeOptions(device="cpu", iterations=3, max_workloads=1)
        first = run_judge(problem, sol, opts, servers)
        pid = servers.pid()
        second = run_judge(problem, sol, opts, servers)
        assert pid is not None and servers.pid() == pid
        for run in (first, second):
            assert [t.evaluation.status for t in run.traces] == [Status.PASSED]
            assert run.returncode == 0
    finally:
        servers.close()
    assert servers.pid() is None


def test_an_overrun_kills_the_server_and_the_next_request_gets_a_new_one():
    server = JudgeServer(sys.executable, dict(__import__("os").environ))
    try:
        with pytest.raises(ServerOverran):
            server.request(_request(), deadline_s=0.2)  # the judge cannot even import in 0.2 s
        assert not server.alive()
    finally:
        server.close()
    servers = JudgeServers()
    try:
        run = servers.run(sys.executable, dict(__import__("os").environ), _request(), deadline_s=300)
        assert run is not None and run.returncode == 0 and '"PASSED"' in run.stdout
    finally:
        servers.close()


def test_another_environment_replaces_the_server():
    import os

    servers = JudgeServers()
    try:
        env = dict(os.environ)
        assert servers.run(sys.executable, env, _request(), deadline_s=300).returncode == 0
        first = servers.pid()
        assert servers.run(sys.executable, env | {"SOLFORGE_TEST_MARK": "1"}, _request(), deadline_s=300).returncode == 0
        assert servers.pid() not in (None, first)
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # the first server is gone, not left running beside the second
    finally:
        servers.close()


def test_a_busy_worker_server_sends_the_caller_to_a_one_shot_judge():
    servers = JudgeServers()
    assert servers._lock.acquire(blocking=False)
    try:
        assert servers.run(sys.executable, {}, _request(), deadline_s=10) is None
    finally:
        servers._lock.release()
        servers.close()


def _judge_on_this_worker(devices: dict[str, str]) -> tuple[int | None, int | None, list[str]]:
    from solforge.judge_server import worker_servers

    servers = worker_servers()
    before = servers.pid()
    opts = JudgeOptions(device="cpu", iterations=3, max_workloads=1, worker_devices=devices)
    run = run_judge(load_problem(PROBLEM), load_solution(SOLUTION), opts, servers)
    return before, servers.pid(), [t.evaluation.status.value for t in run.traces]


def test_device_workers_prestart_the_server_their_first_judge_request_uses(monkeypatch):
    """The campaign's local cluster starts each device worker's judge server at once; the first verify on
    that worker, with the environment it computes itself, reuses that process instead of replacing it."""
    from distributed import Client

    from flows.runtime import GPU_RESOURCE, dask_runtime

    monkeypatch.delenv("SOLFORGE_JUDGE_SERVER", raising=False)
    with dask_runtime("cpu", None, 1, prestart_judges=True) as rt, Client(rt.address, timeout=30) as client:
        fut = client.submit(_judge_on_this_worker, rt.devices, resources={GPU_RESOURCE: 1}, pure=False)
        before, after, statuses = fut.result(timeout=300)
    assert before is not None, "no server was started with the worker"
    assert after == before and statuses == ["PASSED"]
