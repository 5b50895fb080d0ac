"""Making problems as a flow: cut model architectures from the catalog into problems (L1 ops, L2 blocks),
and optionally generate seeded problems beside them; each model and the generated set is its own task run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from tasks.extract_problem import extract_problem, generate_problems

from .runtime import artifact_key

GENERATED_DIR = "generated"


@flow(name="extract-problems")
def extract_problems(
    models: list[str] | None = None,
    out_dir: str = "data/problems",
    dtype: str | None = None,
    level: str = "all",
    ops: list[str] | None = None,
    generate_count: int = 0,
    seed: int = 0,
    families: list[str] | None = None,
) -> dict[str, Any]:
    """Extract the problems of ``models`` (catalog keys) into ``out_dir``; with ``generate_count`` > 0 also
    generate that many seeded problems (``families``, all when unset) into ``out_dir/generated``.

    Returns the directories written per model (and under ``generated``) and the models that failed, with
    their reason: one model's failure does not stop the others."""
    logger = get_run_logger()
    written: dict[str, list[str]] = {}
    failed: dict[str, str] = {}
    futures = [(m, extract_problem.submit(m, out_dir, dtype=dtype, level=level, ops=ops)) for m in models or []]
    for model, fut in futures:
        try:
            written[model] = fut.result()
        except Exception as e:  # noqa: BLE001 - reported per model, the others are kept
            failed[model] = f"{type(e).__name__}: {e}"
            logger.warning(f"{model}: no problems extracted: {failed[model]}")
    if generate_count > 0:
        target = str(Path(out_dir) / GENERATED_DIR)
        written[GENERATED_DIR] = generate_problems(target, generate_count, seed, families)
    lines = [f"- {k}: {len(v)} problems" for k, v in written.items()] + [f"- {k}: failed: {v}" for k, v in failed.items()]
    create_markdown_artifact(key=artifact_key("extract", out_dir), markdown="\n".join(lines) or "nothing asked for")
    return {"written": written, "failed": failed}
