"""Every cheat of the judge corpus gets its expected verdict on the CPU (REFERENCE.md, "Known reward hacks")."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import pytest

from judge_corpus import corpus
from judge_corpus.harness import SOL_BENCH_DIR, cli, fast_config, json_lines, run_entry
from sol_bench.models import Status

SPECIAL = {"sleep_forever", "sleep_at_import", "exit_on_one_workload", "segfault_on_one_workload", "daemon_grandchild",
           "kill_judge", "network_connect", "write_problem_files", "timer_patch", "print_forged_trace",
           "socket_early_reply", "shm_manager_garbage", "read_judge_environ"}  # fmt: skip
SIMPLE = [e for e in corpus.entries("cheats") if e.name not in SPECIAL and "cpu" in e.expect]


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    return tmp_path_factory.mktemp("staging")


def _statuses(traces):
    return {t.workload.uuid: t.evaluation.status for t in traces}


@pytest.mark.parametrize("entry", SIMPLE, ids=lambda e: e.name)
def test_cheat_gets_its_verdict(entry, tmp_path, staging):
    traces, _ = run_entry(entry, tmp_path, staging, first_workloads=1)
    for t in traces:
        assert t.evaluation.status is entry.expected("cpu", t.workload.uuid), (t.evaluation.reason, t.evaluation.log[-1500:])
        assert t.evaluation.status is not Status.PASSED or entry.name == "read_judge_memory"


@pytest.mark.parametrize("name", ["honest/rmsnorm_dps", "honest/row_stats_return", "cheats/mutate_inputs",
                                  "cheats/cache_by_address", "cheats/skip_when_timed", "cheats/gc_scavenge_outputs"])
def test_private_buffers_keep_every_verdict(name, tmp_path, staging):
    """``buffers="private"``: the candidate runs on its process's own copies, and a modified input, a cached
    result, skipped work and scavenged buffers still get their verdicts, since what the call wrote (into its
    inputs too) is copied back where the judge checks it."""
    group, entry = name.split("/")
    e = corpus.entry(group, entry)
    traces, _ = run_entry(e, tmp_path, staging, first_workloads=1, config=fast_config(staging, buffers="private"))
    assert "buffers: private" in traces[0].evaluation.environment.sandbox
    for t in traces:
        want = e.expected("cpu", t.workload.uuid) if group == "cheats" else Status.PASSED
        assert t.evaluation.status is want, (t.evaluation.reason, t.evaluation.log[-1500:])


def test_timer_patch_is_timed_by_the_judges_clock(tmp_path, staging):
    """The candidate freezes every clock in its process and sleeps 3 ms: the judge still sees >= 3 ms."""
    traces, _ = run_entry(corpus.entry("cheats", "timer_patch"), tmp_path, staging, first_workloads=1)
    ev = traces[0].evaluation
    assert ev.status is Status.PASSED, ev.log
    assert ev.performance.latency_ms >= 2.9
    assert ev.performance.timing_method == "judge_perf_counter"


def test_one_crashing_workload_costs_only_that_workload(tmp_path, staging):
    for name in ("exit_on_one_workload", "segfault_on_one_workload"):
        e = corpus.entry("cheats", name)
        traces, _ = run_entry(e, tmp_path / name, staging)
        assert len(traces) == 3
        for t in traces:
            assert t.evaluation.status is e.expected("cpu", t.workload.uuid), t.evaluation.log


def test_sleeping_candidate_times_out_on_every_workload(tmp_path, staging):
    e = corpus.entry("cheats", "sleep_forever")
    t0 = time.monotonic()
    traces, _ = run_entry(e, tmp_path, staging, config=fast_config(staging, timeout_s=6.0))
    assert [t.evaluation.status for t in traces] == [Status.TIMEOUT, Status.TIMEOUT]
    assert time.monotonic() - t0 < 2 * (6.0 + 10)


def test_candidate_hanging_at_import_times_out_once(tmp_path, staging):
    t0 = time.monotonic()
    traces, _ = run_entry(corpus.entry("cheats", "sleep_at_import"), tmp_path, staging,
                          config=fast_config(staging, timeout_s=5.0))  # fmt: skip
    assert [t.evaluation.status for t in traces] == [Status.TIMEOUT, Status.TIMEOUT]
    assert time.monotonic() - t0 < 5.0 + 10


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_daemon_grandchild_is_gone_after_evaluate(tmp_path, staging):
    traces, _ = run_entry(corpus.entry("cheats", "daemon_grandchild"), tmp_path, staging, first_workloads=1)
    assert traces[0].evaluation.status is Status.PASSED, traces[0].evaluation.log
    pid_files = list(staging.glob("*/run/daemon.pid"))
    assert pid_files, "the daemon never started"
    pid = int(pid_files[0].read_text())
    assert not _alive(pid), f"candidate daemon {pid} still alive"


def _digest(*roots: Path) -> str:
    h = hashlib.sha256()
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


def test_writes_outside_staging_are_blocked(tmp_path, staging):
    token = f"{os.getpid()}_{time.monotonic_ns()}"
    pdir = corpus.materialize("rmsnorm_small", tmp_path / "p0")
    before = _digest(pdir, SOL_BENCH_DIR)
    e = corpus.entry("cheats", "write_problem_files")
    from sol_bench.judge import evaluate
    from sol_bench.problem import load_problem

    traces = evaluate(load_problem(pdir), e.solution(PROBLEM_DIR=pdir, SOL_BENCH_DIR=SOL_BENCH_DIR, TOKEN=token),
                      fast_config(staging))  # fmt: skip
    assert {t.evaluation.status for t in traces} <= {Status.RUNTIME_ERROR, Status.REWARD_HACK}
    assert "Permission denied" in traces[0].evaluation.log or "not permitted" in traces[0].evaluation.log
    assert _digest(pdir, SOL_BENCH_DIR) == before
    assert not Path(f"/tmp/solforge_pwned_{token}.txt").exists()
    assert not (SOL_BENCH_DIR / "_pwned.py").exists()


def test_network_connect_is_refused(tmp_path, staging):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.setblocking(False)
    try:
        traces, _ = run_entry(corpus.entry("cheats", "network_connect"), tmp_path, staging, first_workloads=1,
                              PORT=srv.getsockname()[1])  # fmt: skip
        assert traces[0].evaluation.status is Status.RUNTIME_ERROR
        assert "LEAK" not in traces[0].evaluation.log
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()


def _eval_cli(e, tmp_path, staging, first_workloads=None):
    pdir = corpus.materialize(e.problem, tmp_path / "problems", first_workloads)
    sol = e.write_solution_json(tmp_path / "solution.json", PROBLEM_DIR=pdir, SOL_BENCH_DIR=SOL_BENCH_DIR, PORT=9, TOKEN="x")
    return cli(["eval", str(pdir), "--solution", str(sol), "--json", "--iterations", "5", "--warmup", "1",
                "--staging-root", str(staging), "--timeout", "60"])  # fmt: skip


def test_kill_judge_fails_and_the_judge_survives(tmp_path, staging):
    r = _eval_cli(corpus.entry("cheats", "kill_judge"), tmp_path, staging)
    assert r.returncode == 1, r.stderr[-2000:]
    lines = json_lines(r.stdout)
    assert [d["evaluation"]["status"] for d in lines] == ["RUNTIME_ERROR", "RUNTIME_ERROR"]


def test_forged_trace_on_stdout_never_reaches_the_judges_stdout(tmp_path, staging):
    r = _eval_cli(corpus.entry("cheats", "print_forged_trace"), tmp_path, staging)
    assert r.returncode == 1
    lines = json_lines(r.stdout)
    assert len(lines) == 3
    assert all(d["evaluation"]["status"] == "RUNTIME_ERROR" for d in lines)
    assert all(d["solution"] == "cheats/print_forged_trace" for d in lines)


def test_shm_manager_garbage_does_not_kill_the_judge(tmp_path, staging):
    r = _eval_cli(corpus.entry("cheats", "shm_manager_garbage"), tmp_path, staging)
    assert r.returncode == 1, (r.returncode, r.stderr[-1500:])
    assert len(json_lines(r.stdout)) == 3


def test_early_forged_timing_reply_is_not_rewarded(tmp_path, staging):
    r = _eval_cli(corpus.entry("cheats", "socket_early_reply"), tmp_path, staging, first_workloads=1)
    lines = json_lines(r.stdout)
    assert len(lines) == 1
    ev = lines[0]["evaluation"]
    assert ev["status"] != "PASSED" or ev["performance"]["latency_ms"] >= 15.0, ev


def test_judge_environment_is_not_readable(tmp_path, staging):
    traces, _ = run_entry(corpus.entry("cheats", "read_judge_environ"), tmp_path, staging, first_workloads=1)
    assert traces[0].evaluation.status is Status.PASSED, traces[0].evaluation.log[-500:]


def test_faster_than_sol_is_a_reward_hack(tmp_path, staging, monkeypatch):
    """A measured hardware model of 1 MB/s makes T_SOL ~0.1 s for rms-64: any honest time is 'below SOL'."""
    from sol_bench.sol.hardware import HardwareModel, Precision, device_name, slugify

    home = tmp_path / "home"
    path = home / ".cache" / "solforge" / "hardware" / f"measured-{slugify(device_name('cpu'))}.json"
    path.parent.mkdir(parents=True)
    model = HardwareModel(name="slow test model", bandwidth_bytes_per_s=1e6, macs_per_s={Precision.fp32: 1e6},
                          fp32_matmul_as=Precision.fp32)  # fmt: skip
    path.write_text(model.model_dump_json())
    monkeypatch.setenv("HOME", str(home))
    e = corpus.entry("honest", "rmsnorm_dps")
    traces, _ = run_entry(e, tmp_path, staging, config=fast_config(staging, hardware="measured"))
    by = {t.workload.uuid: t.evaluation for t in traces}
    assert by["rms-64"].status is Status.REWARD_HACK
    assert "speed-of-light" in by["rms-64"].reason
