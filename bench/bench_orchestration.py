"""Orchestration overhead per candidate and time to the first verdict of ``solforge run``.

Two runs of ``solforge run`` on one problem with the reference agent (no agent thinking):
  real judge  time from the command's start to the first stored verdict, and the per-candidate overhead;
  null judge  the judge replaced by a script that answers PASSED at once, so what is left is orchestration.
Per-candidate overhead, on one problem's chain (attempts are sequential there):
  (verdict_i - verdict_{i-1}) - judge wall_i - generate_i, for i >= 1,
i.e. everything but the judge, builds and the agent: Prefect task runs, Dask scheduling, compile check,
scoring, validation and Parquet writes. Prints a markdown table and writes it to --out.

    python bench/bench_orchestration.py --device cpu --candidates 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fake_judge

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def run_once(label: str, problem: Path, device: str, n: int, data: Path, env: dict[str, str]) -> dict:
    run_id = f"bench-{label}"
    cmd = [str(Path(sys.executable).parent / "solforge"), "run", str(problem), "--agent", "reference",
           "--device", device, "--max-candidates", str(n), "--iterations", "5", "--data-dir", str(data),
           "--run-id", run_id, "--json"]
    traces = data / "tables" / "traces" / f"run_id={run_id}"
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    first = None
    while proc.poll() is None:
        if first is None and traces.is_dir() and any(traces.glob("part-*.parquet")):
            first = time.monotonic() - t0
        time.sleep(0.05)
    total = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{label}: solforge run exited {proc.returncode}")
    if first is None:
        first = total
    from solforge.store.query import query

    rows = query(data, f"""
        SELECT c.attempt, c.generate_s, max(t.created_at) AS verdict_at, sum(t.judge_s) AS judge_wall
        FROM candidates c JOIN traces t USING (run_id, candidate_id)
        WHERE c.run_id = '{run_id}' GROUP BY ALL ORDER BY c.attempt""").to_pylist()
    overheads = []
    for prev, cur in zip(rows, rows[1:]):
        gap = (cur["verdict_at"] - prev["verdict_at"]).total_seconds()
        overheads.append(gap - (cur["judge_wall"] or 0.0) - (cur["generate_s"] or 0.0))
    return {
        "label": label, "candidates": len(rows), "first_verdict_s": first, "total_s": total,
        "overhead_median_s": statistics.median(overheads) if overheads else float("nan"),
        "overhead_max_s": max(overheads) if overheads else float("nan"),
        "judge_median_s": statistics.median(r["judge_wall"] for r in rows) if rows else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--problem", type=Path, default=REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small")
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args()
    out = ns.out or REPO / "bench" / "results" / f"orchestration_{ns.device.replace(':', '')}.md"
    base_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    results = []
    with tempfile.TemporaryDirectory(prefix="solforge-bench-") as tmp:
        tmp = Path(tmp)
        results.append(run_once("real", ns.problem, ns.device, ns.candidates, tmp / "real", base_env))
        null = fake_judge.install(tmp / "null_judge")
        results.append(run_once("null", ns.problem, ns.device, ns.candidates, tmp / "null",
                                base_env | {"SOLFORGE_JUDGE_PYTHON": str(null), "SOLFORGE_JUDGE_SERVER": "0"}))
    lines = [
        f"# Orchestration overhead ({ns.device}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"problem {ns.problem.name})",
        "",
        "| judge | candidates | first verdict (s) | whole run (s) | judge wall per candidate (s) "
        "| overhead per candidate, median (s) | max (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r['label']} | {r['candidates']} | {r['first_verdict_s']:.1f} | {r['total_s']:.1f} "
                     f"| {r['judge_median_s']:.2f} | {r['overhead_median_s']:.2f} | {r['overhead_max_s']:.2f} |")
    lines += ["", "Targets: first verdict <= 60 s on the CPU; overhead <= 1 s per candidate.",
              "```json", json.dumps(results, indent=1), "```"]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
