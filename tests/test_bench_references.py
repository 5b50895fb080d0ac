"""bench/bench_problem_references.py: every reference timed per workload beside its T_SOL, and a T_SOL above a
measured time (impossible for a sound SOL model) named in the summary."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "problems"


def _module(monkeypatch):
    path = REPO / "bench" / "bench_problem_references.py"
    spec = importlib.util.spec_from_file_location("bench_problem_references", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _run(module, monkeypatch, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "refs.md"
    argv = ["bench_problem_references.py", "--problems", str(FIXTURES), "--device", "cpu", "--match", "rmsnorm",
            "--iterations", "2", "-o", str(out), *extra]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    assert module.main() == 0
    return out.read_text()


def test_references_are_timed_on_spread_workloads_and_a_sound_sol_is_never_above_them(tmp_path, monkeypatch) -> None:
    module = _module(monkeypatch)
    text = _run(module, monkeypatch, tmp_path, "--workloads", "2")
    rows = [line for line in text.splitlines() if line.startswith("| rmsnorm")]
    assert rows and all("| ok |" in r for r in rows)
    assert f"{len(rows)} workloads, 0 failed; T_SOL above the measured reference on 0" in text


def test_a_sol_above_the_measured_time_is_named(tmp_path, monkeypatch) -> None:
    module = _module(monkeypatch)
    monkeypatch.setattr(module, "sol_times", lambda problem: tuple(1e6 for _ in problem.workloads))
    text = _run(module, monkeypatch, tmp_path, "--smallest")
    rows = [line for line in text.splitlines() if line.startswith("| rmsnorm")]
    assert f"T_SOL above the measured reference on {len(rows)}" in text
    assert all(f"\n- {r.split(' | ')[0].removeprefix('| ')} " in text for r in rows)
