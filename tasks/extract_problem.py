"""Prefect task: extract problems from a model architecture into a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task


@task(name="extract-problem", task_run_name="extract-{model}")
def extract_problem(
    model: str,
    out_dir: str,
    config: dict[str, Any] | None = None,
    dtype: str | None = None,
    level: str = "all",
    ops: list[str] | None = None,
) -> list[str]:
    """Write the problems of ``model`` under ``out_dir``; returns the problem directories."""
    from solforge.problems import extract, write_problems

    drafts = extract(model, config, dtype=dtype, level=level, ops=ops)
    return [str(p) for p in write_problems(drafts, Path(out_dir))]
