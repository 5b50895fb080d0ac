"""The candidate's process runs on its GPU's local CPUs: CPU lists, sysfs lookup, and the worker's pinning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_corpus import corpus
from sol_bench.affinity import format_cpulist, gpu_local_cpus, local_cpus, parse_cpulist
from sol_bench.runner import candidate_env, start_worker
from sol_bench.staging import stage

import torch


def test_parse_cpulist_ranges_singles_and_blank():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("5") == {5}
    assert parse_cpulist("\n") == frozenset()
    with pytest.raises(ValueError, match="not a CPU list"):
        parse_cpulist("0-x")


def test_format_cpulist_merges_runs_and_round_trips():
    cpus = {0, 1, 2, 3, 8, 10, 11, 13}
    assert format_cpulist(cpus) == "0-3,8,10-11,13"
    assert parse_cpulist(format_cpulist(cpus)) == cpus
    assert format_cpulist(set()) == ""


def _sysfs(tmp_path: Path, address: str, text: str) -> Path:
    d = tmp_path / "bus" / "pci" / "devices" / address
    d.mkdir(parents=True)
    (d / "local_cpulist").write_text(text)
    return tmp_path


def test_local_cpus_reads_sysfs_and_keeps_only_cpus_this_process_may_use(tmp_path):
    mine = sorted(os.sched_getaffinity(0))
    far = max(mine) + 64  # a CPU this process cannot run on
    sysfs = _sysfs(tmp_path, "0000:1b:00.0", f"{mine[0]},{far}\n")
    assert local_cpus("0000:1b:00.0", sysfs) == {mine[0]}


def test_local_cpus_unknown_when_missing_unreadable_or_disjoint(tmp_path):
    far = max(os.sched_getaffinity(0)) + 64
    sysfs = _sysfs(tmp_path, "0000:2c:00.0", f"{far}-{far + 3}\n")
    assert local_cpus("0000:2c:00.0", sysfs) is None  # no overlap: pinning there would fail
    assert local_cpus("0000:99:00.0", sysfs) is None  # no such device
    assert local_cpus(None, sysfs) is None
    _sysfs(tmp_path, "0000:3d:00.0", "garbage\n")
    assert local_cpus("0000:3d:00.0", tmp_path) is None


def test_no_pinning_off_cuda():
    assert gpu_local_cpus(torch.device("cpu")) is None


def test_worker_runs_on_the_cpus_it_is_given(tmp_path):
    e = corpus.entry("honest", "rmsnorm_dps")
    sol = e.solution()
    staged = stage(sol, tmp_path / "staging")
    one = min(os.sched_getaffinity(0))
    env = candidate_env(staged, "cpu")
    worker = start_worker(staged, "cpu", sol.spec.entry_file, sol.spec.entry_function,
                          sol.spec.destination_passing_style, None, env, 120.0, cpus=frozenset({one}))  # fmt: skip
    try:
        assert worker.info["cpus"] == [one]
        assert os.sched_getaffinity(worker.proc.pid) == {one}
    finally:
        worker.stop()
    unpinned = start_worker(staged, "cpu", sol.spec.entry_file, sol.spec.entry_function,
                            sol.spec.destination_passing_style, None, env, 120.0)  # fmt: skip
    try:
        assert unpinned.info["cpus"] == sorted(os.sched_getaffinity(0))
    finally:
        unpinned.stop()
