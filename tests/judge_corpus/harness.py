"""Helpers the judge tests share: fast configs, running a corpus entry in-process or through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sol_bench.judge import JudgeConfig, evaluate
from sol_bench.models import Trace
from sol_bench.problem import load_problem

from . import corpus

REPO = Path(__file__).resolve().parents[2]
SOL_BENCH_DIR = REPO / "sol_bench"


def fast_config(staging_root: Path, **kw) -> JudgeConfig:
    base = dict(iterations=5, warmup=1, correctness_rounds=2, staging_root=staging_root, hardware="B200", timeout_s=60.0)
    base.update(kw)
    return JudgeConfig(**base)


def params(problem_dir: Path, **extra) -> dict:
    return {"PROBLEM_DIR": problem_dir, "SOL_BENCH_DIR": SOL_BENCH_DIR, "PORT": 9, "TOKEN": "x", **extra}


def run_entry(e: corpus.Entry, tmp: Path, staging: Path, first_workloads: int | None = None, config=None,
              **extra) -> tuple[list[Trace], Path]:  # fmt: skip
    pdir = corpus.materialize(e.problem, tmp / "problems", first_workloads)
    traces = evaluate(load_problem(pdir), e.solution(**params(pdir, **extra)), config or fast_config(staging))
    return traces, pdir


def cli(args: list[str], timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m sol_bench ...`` in its own session (so a candidate that signals a group cannot reach pytest)."""
    return subprocess.run(
        [sys.executable, "-m", "sol_bench", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )  # fmt: skip


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]
