"""One offline-agent table from several bench runs, against any T_b records: no GPU needed.

``bench_offline_agents.py --json-out`` writes one record per problem (the best candidate's T_k per workload,
the median of its confirmation runs). This script merges such files (a later file's row replaces an earlier
one for the same problem), takes T_b per workload from one or more baseline files (``measure_tb.py``
records; later files win per workload), recomputes T_SOL with the judge's speed-of-light model for the named
hardware, scores every workload with ``sol_bench.score.sol_score`` and writes the per-problem table with the
aggregates of ``sol_bench.score.aggregate_by_problem``: geomean T_b / T_k, the fraction beating T_b, and the
median SOL score (the mean of the two middle values when the count is even).

    python bench/offline_table.py --records a.jsonl b.jsonl --baselines tb.jsonl --hardware h200 -o table.md
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sol_bench.problem import find_problems, load_problem  # noqa: E402
from sol_bench.score import WorkloadScore, aggregate, aggregate_by_problem, sol_score  # noqa: E402


@dataclass(frozen=True)
class Row:
    problem: str
    best: str
    passed: str  # "passing/tried"
    scores: tuple[WorkloadScore, ...]  # one per workload with a T_b
    t_b_kind: str
    source: str  # the records file the row came from


def read_jsonl(path: Path) -> list[dict]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON ({e})") from None
    return out


def merged_records(paths: list[Path]) -> dict[str, tuple[dict, str]]:
    """problem -> (record, file name); a later file replaces an earlier file's row for the same problem."""
    rows: dict[str, tuple[dict, str]] = {}
    for p in paths:
        for r in read_jsonl(p):
            if "problem" not in r or "latencies_ms" not in r:
                raise SystemExit(f"{p}: a record without 'problem' and 'latencies_ms' (not a --json-out file)")
            rows[r["problem"]] = (r, p.name)
    return rows


def merged_baselines(paths: list[Path]) -> dict[str, dict]:
    """workload uuid -> baseline record (later files win)."""
    out: dict[str, dict] = {}
    for p in paths:
        for r in read_jsonl(p):
            if "uuid" not in r or "t_b_ms" not in r:
                raise SystemExit(f"{p}: a record without 'uuid' and 't_b_ms' (not a measure_tb.py file)")
            out[r["uuid"]] = r
    return out


def t_sol_ms(problem_dir: Path, uuid: str, hardware: str) -> float:
    from sol_bench.sol.analyze import analyze_workload
    from sol_bench.sol.hardware import get_hardware

    problem = load_problem(problem_dir)
    [w] = [w for w in problem.workloads if w.uuid == uuid]
    return float(analyze_workload(problem.definition, w, get_hardware(hardware, "cuda")).t_sol_ms)


def build_rows(records: dict[str, tuple[dict, str]], baselines: dict[str, dict], problem_dirs: dict[str, Path],
               hardware: str) -> tuple[list[Row], list[str]]:  # fmt: skip
    rows, notes = [], []
    for name, (r, source) in records.items():
        if r.get("best") is None:
            notes.append(f"{name}: no candidate passed ({source})")
            continue
        if name not in problem_dirs:
            raise SystemExit(f"{source}: problem {name} is not under the problems root")
        scores, kinds = [], []
        for uuid, t_k in r["latencies_ms"].items():
            base = baselines.get(uuid)
            if base is None:
                notes.append(f"{name}: no T_b for workload {uuid}; left out")
                continue
            kinds.append(base.get("best_variant", "?"))
            scores.append(sol_score(t_k, float(base["t_b_ms"]), t_sol_ms(problem_dirs[name], uuid, hardware)))
        if scores:
            rows.append(Row(name, r["best"], f"{r['passed']}/{r['tried']}", tuple(scores), ",".join(dict.fromkeys(kinds)),
                            source))  # fmt: skip
    return rows, notes


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def render(rows: list[Row], notes: list[str], title: str) -> str:
    agg = aggregate_by_problem({r.problem: r.scores for r in rows})
    lines = [
        title,
        "",
        f"- problems: {agg.n}; geomean vs T_b: {_fmt(agg.geomean_speedup, '.3f')}×; beat T_b: "
        f"{round(agg.fraction_beating_baseline * agg.n)}/{agg.n}; median SOL score: {_fmt(agg.median_sol_score, '.3f')}"
        + (f"; flagged faster than T_SOL: {agg.n_faster_than_sol}" if agg.n_faster_than_sol else ""),
        "",
        "| problem | best candidate | passing/tried | T_k ms | T_b ms (variant) | vs T_b | SOL score | records |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        one = aggregate(r.scores)  # over the problem's workloads (one each in the benches so far)
        t_k = " ".join(_fmt(s.t_k_ms, ".4f") for s in r.scores)
        t_b = " ".join(f"{s.t_b_ms:.4f}" for s in r.scores)
        lines.append(f"| {r.problem} | {r.best} | {r.passed} | {t_k} | {t_b} ({r.t_b_kind}) | "
                     f"{_fmt(one.geomean_speedup, '.2f')}× | {_fmt(one.mean_sol_score, '.3f')} | {r.source} |")  # fmt: skip
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=Path, nargs="+", required=True, help="bench_offline_agents.py --json-out files")
    ap.add_argument("--baselines", type=Path, nargs="+", required=True, help="measure_tb.py output files")
    ap.add_argument("--problems-root", type=Path, default=REPO / "data" / "problems")
    ap.add_argument("--hardware", default="h200", help="the SOL model's hardware (as solforge sol --hardware)")
    ap.add_argument("--title", default="# Offline agents")
    ap.add_argument("-o", "--output", type=Path)
    a = ap.parse_args()
    dirs = {load_problem(d).name: d for d in find_problems(a.problems_root)}
    rows, notes = build_rows(merged_records(a.records), merged_baselines(a.baselines), dirs, a.hardware)
    if not rows:
        raise SystemExit("no row has both a passing candidate and a T_b")
    text = render(rows, notes, a.title)
    if a.output:
        a.output.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
