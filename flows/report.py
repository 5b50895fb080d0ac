"""The report: a table per problem (best speedup vs eager and vs T_b, best SOL score, over candidates other than
the bare eager reference) and the aggregates."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from solforge.store.stats import aggregates, problem_results

from .runtime import artifact_key
from .runtime import data_dir as resolve_data_dir


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def markdown(run_id: str, rows: list[dict[str, Any]], agg: dict[str, Any]) -> str:
    lines = [
        f"# solforge run `{run_id}`",
        "",
        "| problem | attempts | passed | best speedup vs eager | best speedup vs T_b | best SOL score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["reference_only"]:
            lines.append(f"| {r['problem']} | {r['attempts']} | {r['passed']} | only the eager reference passed | | |")
            continue
        lines.append(
            f"| {r['problem']} | {r['attempts']} | {r['passed']} | {_fmt(r['best_speedup_vs_eager'], '.2f')} "
            f"| {_fmt(r['best_speedup'], '.2f')} | {_fmt(r['best_sol_score'])} |"
        )
    lines += ["", "| aggregate | value |", "|---|---:|"]
    lines += [f"| {k} | {_fmt(v, '.3f') if isinstance(v, float) else v} |" for k, v in agg.items()]
    return "\n".join(lines) + "\n"


def table_rows(rows: list[dict[str, Any]], digits: int = 4) -> list[dict[str, Any]]:
    """The rows as the table artifact shows them: floats rounded (the returned report keeps full precision)."""
    return [{k: round(v, digits) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def build_report(store_dir: str, run_id: str) -> dict[str, Any]:
    results = problem_results(store_dir, run_id)
    rows = [asdict(r) for r in results]
    agg = aggregates(results)
    return {"run_id": run_id, "problems": rows, "aggregates": agg, "markdown": markdown(run_id, rows, agg)}


@flow(name="report")
def report(run_id: str, data_dir: str | None = None) -> dict[str, Any]:
    """Publish the run's result table and aggregates as Prefect artifacts; return them."""
    out = build_report(str(resolve_data_dir(data_dir)), run_id)
    if out["problems"]:
        create_table_artifact(key=artifact_key("results", run_id), table=table_rows(out["problems"]),
                              description=f"run {run_id}: best result per problem")
    create_markdown_artifact(key=artifact_key("report", run_id), markdown=out["markdown"],
                             description=f"run {run_id}: per-problem table and aggregates")
    if out["problems"]:
        out["html"] = html_report(str(resolve_data_dir(data_dir)), run_id)
    return out


def html_report(store_dir: str, run_id: str) -> str | None:
    """Write the run's HTML report under <data dir>/reports/<run id>/ and link it from an artifact. A report
    that fails to render is logged, not raised: the run's results are stored whatever the page does."""
    from solforge.report import build_report

    try:
        index = build_report(store_dir, Path(store_dir) / "reports" / run_id, [run_id]).resolve()
    except Exception as e:  # noqa: BLE001 - any rendering failure: the campaign's results still stand
        get_run_logger().warning(f"HTML report of run {run_id} not written: {type(e).__name__}: {e}")
        return None
    create_markdown_artifact(key=artifact_key("html-report", run_id),
                             markdown=f"[HTML report of run `{run_id}`]({index.as_uri()})\n\n`{index}`",
                             description=f"run {run_id}: the HTML report (figures, winners and their sources)")
    return str(index)
