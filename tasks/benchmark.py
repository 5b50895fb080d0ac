"""benchmark: measure a problem's baseline T_b on a GPU worker with ``solforge baseline`` (a subprocess).

T_b is the best of the eager reference and PyTorch's own optimizations of it (``sol_bench.baseline``);
the subprocess keeps that work off the orchestrating process and pinned to the worker's device. The rows
go to the ``baselines`` table: kind 'eager' and kind 't_b' per workload; the campaign scores against the
latest 't_b' rows of the same device.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from solforge.judge_client import JudgeOptions

_RUN_CLI = "from solforge.cli import main; main()"


def baseline_argv(problem_dir: str, data_dir: str, options: JudgeOptions) -> list[str]:
    argv = [options.python, "-c", _RUN_CLI, "baseline", problem_dir, "--device", options.device,
            "--data-dir", data_dir, "--json"]
    if options.iterations:
        argv += ["--iterations", str(options.iterations), "--warmup", str(min(10, options.iterations))]
    return argv


def baseline_rows(run_id: str, device: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        for kind, ms in (("eager", r["eager_ms"]), ("t_b", r["t_b_ms"])):
            rows.append({"run_id": run_id, "problem": r["problem"], "workload_uuid": r["uuid"], "kind": kind,
                         "device": device, "status": "PASSED", "latency_ms": ms, "t_sol_ms": None})
    return rows


@task(name="benchmark", cache_policy=NO_CACHE)
def benchmark_baseline(run_id: str, problem_dir: str, data_dir: str, options: JudgeOptions) -> list[dict[str, Any]]:
    """Rows for the ``baselines`` table; raises when the baseline cannot be measured (nothing to score against)."""
    proc = subprocess.run(baseline_argv(problem_dir, data_dir, options), capture_output=True, text=True,
                          env=options.judge_env(), timeout=options.wall_limit_s(64))
    if proc.returncode != 0:
        raise RuntimeError(f"solforge baseline {problem_dir} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return baseline_rows(run_id, options.device, records)
