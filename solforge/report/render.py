"""Write the HTML report of some runs: ``index.html`` (figures inline) and each winner's files beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import jinja2

from sol_bench.models import Solution
from solforge.export.solution_dir import safe_name, write_solution_dir
from solforge.store import report_queries as rq

from . import plots, series

INDEX = "index.html"
WINNERS = "winners"
TRACES_FILE = "traces.jsonl"


class ReportError(Exception):
    """Nothing to report (no run, or the runs asked for have no candidate)."""


@dataclass(frozen=True)
class WinnerLinks:
    """A winner and the report-relative links to its files (None when its solution file is missing)."""

    winner: rq.Winner
    solution: str | None
    entry: str | None
    traces: str


def _copy_winner(data_dir: Path, w: rq.Winner, out_dir: Path) -> WinnerLinks:
    rel = Path(WINNERS) / safe_name(w.problem)
    dest = out_dir / rel
    dest.mkdir(parents=True, exist_ok=True)
    rows = rq.candidate_traces(data_dir, w.run_id, w.candidate_id)
    (dest / TRACES_FILE).write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    sol_file = rq.solution_file(data_dir, w.run_id, w.candidate_id)
    if not sol_file.is_file():
        return WinnerLinks(w, None, None, (rel / TRACES_FILE).as_posix())
    solution = Solution.model_validate_json(sol_file.read_text())
    write_solution_dir(solution, dest)
    return WinnerLinks(w, (rel / "solution.json").as_posix(), (rel / solution.spec.entry_file).as_posix(),
                       (rel / TRACES_FILE).as_posix())  # fmt: skip


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("solforge.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = lambda v, spec=".3f": "–" if v is None else format(v, spec)
    return env


def build_report(data_dir: Path | str, out_dir: Path | str, runs: Sequence[str] | None = None) -> Path:
    """Render the report of ``runs`` (every run when None) into ``out_dir``; returns ``index.html``."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    runs = list(runs) if runs else rq.run_ids(data_dir)
    if not runs:
        raise ReportError(f"{data_dir}: no run has stored a candidate")
    cands = rq.candidate_results(data_dir, runs)
    if not cands:
        raise ReportError(f"{data_dir}: runs {', '.join(runs)} have no candidate")
    winners = rq.winners(data_dir, runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    links = [_copy_winner(data_dir, w, out_dir) for w in winners]

    problems = sorted({c.problem for c in cands})
    paths = {c.problem: c.problem_path for c in cands if c.problem_path}
    families = {p: series.family_of(paths.get(p)) for p in problems}
    kinds = series.group_rows(cands, lambda c: c.op_type or series.UNKNOWN)
    languages = series.group_rows(cands, lambda c: c.language)
    by_family = series.group_rows(cands, lambda c: families[c.problem])
    per_problem = series.group_rows(cands, lambda c: c.problem)
    figures = [
        plots.per_problem(problems, winners),
        plots.sol_distribution(cands, winners),
        plots.best_so_far(series.best_so_far_by_attempt(cands), series.best_over_time(cands)),
        plots.by_group(kinds, languages),
    ]
    has_cost = any(r.cost_usd > 0 or r.gpu_s > 0 for r in per_problem)
    if has_cost:
        figures.append(plots.cost(per_problem))
    context: dict[str, Any] = {
        "runs": runs,
        "run_events": rq.run_events(data_dir, runs),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "summary": series.summary(cands, winners),
        "figures": figures,
        "winners": links,
        "unsolved": [p for p in problems if p not in {w.problem for w in winners}],
        "kinds": kinds,
        "languages": languages,
        "families": by_family if any(f != series.UNKNOWN for f in families.values()) else [],
        "per_problem": per_problem if has_cost else [],
    }
    index = out_dir / INDEX
    index.write_text(_environment().get_template("report.html").render(**context))
    return index
