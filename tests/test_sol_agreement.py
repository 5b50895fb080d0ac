"""bench/sol_agreement.py: published T_SOL values compared with solforge's own analysis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests/fixtures/problems/rmsnorm_small"


def _ours() -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "solforge", "sol", str(FIXTURE), "--hardware", "B200", "--json"],
                         capture_output=True, text=True, check=True, cwd=REPO)  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/sol_agreement.py", *args], capture_output=True, text=True, cwd=REPO)


def test_counts_agreement_and_leaves_out_tiny(tmp_path):
    ours = _ours()
    assert len(ours) >= 3
    # Published values: the first within 3%, the second 20% off, the rest tiny (below the --tiny-us cut).
    published = [
        {"uuid": ours[0]["uuid"], "t_sol_us": ours[0]["t_sol_ms"] * 1e3 * 1.03},
        {"uuid": ours[1]["uuid"], "t_sol_ms": ours[1]["t_sol_ms"] / 1.2},
        *({"uuid": o["uuid"], "t_sol_ms": o["t_sol_ms"]} for o in ours[2:]),
        {"uuid": "not-in-these-problems", "t_sol_ms": 1.0},
    ]
    pub = tmp_path / "published.jsonl"
    pub.write_text("".join(json.dumps(p) + "\n" for p in published))
    saved = tmp_path / "ours.jsonl"
    saved.write_text("".join(json.dumps(o) + "\n" for o in ours))
    # Every fixture workload is far below a microsecond: put the tiny cut between them.
    cut_us = min(ours[0]["t_sol_ms"], ours[1]["t_sol_ms"] / 1.2) * 1e3 * 0.99
    smaller = [o for o in ours[2:] if o["t_sol_ms"] * 1e3 < cut_us]
    res = _run("--ours", str(saved), "--published", str(pub), "--tiny-us", str(cut_us))
    assert res.returncode == 0, res.stderr
    compared = 2 + (len(ours) - 2 - len(smaller))
    within = 1 + (len(ours) - 2 - len(smaller))
    assert f"compared: {compared} workloads; within ±5%: {within} " in res.stdout
    assert f"tiny workloads left out: {len(smaller)}" in res.stdout
    assert "published but not in the problems given: 1" in res.stdout
    assert "+20.0%" in res.stdout


def test_published_file_without_values_names_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("uuid,latency\nrms-1,0.5\n")
    res = _run(str(FIXTURE), "--published", str(bad))
    assert res.returncode != 0
    assert "bad.csv: record 1: needs 'uuid'" in res.stderr


def _module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sol_agreement", REPO / "bench/sol_agreement.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_a_value_rounded_to_its_last_digit_agrees_within_that_rounding(tmp_path):
    mod = _module()
    assert mod.resolution("0.0005") == pytest.approx(1e-4)
    assert mod.resolution("0.0028788") == pytest.approx(1e-7)
    assert mod.resolution("5e-4") == 0.0
    pub = tmp_path / "p.jsonl"
    pub.write_text('{"uuid": "a", "b200_sol_ms": 0.0005}\n{"uuid": "b", "t_sol_us": 0.5}\n')
    published = mod.read_published(pub)
    assert published["a"] == pytest.approx((0.0005, 1e-4))
    assert published["b"] == pytest.approx((0.0005, 1e-4))  # 0.5 us printed to 0.1 us
    near = mod.Row("a", "p", 0.00054, published["a"][0], resolution_ms=published["a"][1])  # +8%, but 0.00054 prints as 0.0005
    far = mod.Row("a", "p", 0.00056, published["a"][0], resolution_ms=published["a"][1])  # prints as 0.0006
    assert abs(near.rel_error) > 0.05 and near.agrees(0.05)
    assert not far.agrees(0.05)
    assert mod.rounded_share([near, far], 0.05) == 0.5
