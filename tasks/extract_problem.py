"""Prefect tasks that make problems: cut a model architecture into problems, or generate seeded ones."""

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


@task(name="generate-problems", task_run_name="generate-{count}-seed-{seed}")
def generate_problems(out_dir: str, count: int, seed: int, families: list[str] | None = None) -> list[str]:
    """Write ``count`` seeded problems (each loaded, run on the CPU and priced before it is kept) and their
    manifest to ``out_dir``, which must be empty or absent; returns the problem directories."""
    from solforge.problems.generate import GenerateConfig, generate

    manifest = generate(Path(out_dir), GenerateConfig(seed=seed, count=count, families=tuple(families or ())))
    return [str(Path(out_dir) / p.path) for p in manifest.problems]
