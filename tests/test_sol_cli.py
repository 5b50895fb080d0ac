"""``solforge sol`` and ``solforge baseline`` through click."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from solforge.cli import cli

FIXTURES = Path(__file__).parent / "fixtures" / "problems"


def test_sol_json_one_object_per_workload():
    res = CliRunner().invoke(cli, ["sol", str(FIXTURES), "--json", "--hardware", "h200"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    uuids = {r["uuid"] for r in rows if r["problem"] == "rmsnorm_small"}
    assert uuids == {"rms-1", "rms-7", "rms-64"}
    row = next(r for r in rows if r["uuid"] == "rms-64")
    assert {"problem", "uuid", "macs", "bytes", "precision", "t_compute_ms", "t_memory_ms", "t_sol_ms", "bound"} <= set(row)
    assert row["bytes"] == 66_048 and row["hardware"] == "H200"
    assert abs(row["t_sol_ms"] - 66_048 / 4.8e12 * 1e3) < 1e-12


def test_sol_table_and_unanalysable_problem(tmp_path):
    bad = tmp_path / "set" / "broken"
    shutil.copytree(FIXTURES / "rmsnorm_small", bad)
    d = json.loads((bad / "definition.json").read_text())
    d["name"] = "broken"
    d["reference"] = "def run(x, weight, eps):\n    raise RuntimeError('no meta for you')\n"
    (bad / "definition.json").write_text(json.dumps(d))
    shutil.copytree(FIXTURES / "rmsnorm_small", tmp_path / "set" / "rmsnorm_small")
    res = CliRunner().invoke(cli, ["sol", str(tmp_path / "set")])
    assert res.exit_code == 1
    assert "T_SOL_us" in res.output and "rms-64" in res.output
    assert "cannot analyse" in res.output and "no meta for you" in res.output


def test_help_ends_with_example():
    for cmd in ("sol", "baseline"):
        res = CliRunner().invoke(cli, [cmd, "--help"])
        assert res.exit_code == 0 and "Example:" in res.output and f"solforge {cmd} " in res.output


def test_baseline_command_stores_records(tmp_path):
    res = CliRunner().invoke(
        cli,
        ["baseline", str(FIXTURES / "rmsnorm_small"), "--variants", "eager", "--iterations", "3", "--warmup", "1",
         "--data-dir", str(tmp_path), "--json"],  # fmt: skip
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert [r["uuid"] for r in rows] == ["rms-1", "rms-7", "rms-64"]
    assert len(list((tmp_path / "baselines").glob("*/rmsnorm_small.json"))) == 1
    res = CliRunner().invoke(cli, ["baseline", str(FIXTURES), "--variants", "turbo"])
    assert res.exit_code != 0


def test_a_root_without_problems_is_refused_before_anything_is_printed(tmp_path):
    from click.testing import CliRunner

    from solforge.cli import cli

    good = Path(__file__).parent / "fixtures/problems/rmsnorm_small"
    empty = tmp_path / "empty"
    empty.mkdir()
    for cmd in (["sol", "--json"], ["baseline", "--json", "--no-save", "--variants", "eager"]):
        res = CliRunner().invoke(cli, [cmd[0], str(good), str(empty), *cmd[1:]])
        assert res.exit_code == 2, res.output
        assert "no definition.json at or below it" in res.output and str(empty) in res.output
        assert '"uuid"' not in res.output  # the good root was not analysed first
