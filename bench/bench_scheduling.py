"""Scheduler-only throughput of ``solforge run`` with 1 versus N device slots, on the CPU.

Runs the real campaign (CLI, Prefect server, Dask local cluster, planner, stores) on ``--problems`` copies
of the rmsnorm fixture with the reference agent, and a fake judge that holds its device slot for
``--judge-s`` seconds per candidate and answers PASSED (each attempt a little faster, so the planner never
sees a plateau). ``--cpu-device-workers N`` gives the cluster N workers holding the device resource, as N
GPUs would. Reports per slot count:

  wall        the whole command (Prefect server and cluster start included)
  window      first judge start to last stored verdict (the scheduler's part: startup left out)
  occupancy   judge seconds / (window x slots)
  ratio       candidates per second in the window, versus the first slot count

Writes a Markdown table to --out.

    python bench/bench_scheduling.py --slots 1 --slots 2 --problems 6 --candidates 24 --judge-s 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fake_judge
from report_text import emit_report

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"


def make_problems(root: Path, n: int) -> Path:
    """``n`` copies of the fixture, each under its own name (the judge is fake: only names matter)."""
    for i in range(n):
        d = root / f"sched_{i:02d}"
        d.mkdir(parents=True)
        definition = json.loads((FIXTURE / "definition.json").read_text())
        definition["name"] = d.name
        (d / "definition.json").write_text(json.dumps(definition))
        (d / "workload.jsonl").write_text((FIXTURE / "workload.jsonl").read_text())
    return root


def run_once(slots: int, problems: Path, args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict:
    data = work / f"data-{slots}"
    run_id = f"sched-{slots}"
    cmd = [sys.executable, "-m", "solforge", "run", str(problems), "--agent", "reference",
           "--device", "cpu", "--cpu-device-workers", str(slots), "--max-candidates", str(args.candidates),
           "--max-workloads", "1", "--iterations", "1", "--data-dir", str(data), "--run-id", run_id, "--json"]
    log = work / f"run-{slots}.log"
    t0 = time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        print(log.read_text()[-4000:], file=sys.stderr)
        raise SystemExit(f"{slots} slot(s): solforge run exited {rc}")
    from solforge.store.query import query

    rows = query(data, f"""
        SELECT candidate_id, sum(judge_s) AS judge_s, max(created_at) AS verdict_at
        FROM traces WHERE run_id = '{run_id}' GROUP BY 1""").to_pylist()
    rounds = query(data, f"SELECT count(DISTINCT round) AS n FROM decisions WHERE run_id = '{run_id}'").to_pylist()
    judge_s = sum(r["judge_s"] or 0.0 for r in rows)
    start = min(r["verdict_at"].timestamp() - (r["judge_s"] or 0.0) for r in rows)
    window = max(r["verdict_at"].timestamp() for r in rows) - start
    return {"slots": slots, "candidates": len(rows), "wall_s": wall, "window_s": window, "judge_s": judge_s,
            "occupancy": judge_s / (window * slots), "rate": len(rows) / window, "plans": rounds[0]["n"],
            "stop": json.loads(log.read_text().strip().splitlines()[-1]).get("stop_reason")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slots", type=int, action="append", help="device slots (repeatable; default 1 and 2)")
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--candidates", type=int, default=4, help="--max-candidates of every run (per problem)")
    ap.add_argument("--judge-s", type=float, default=2.0, help="seconds the fake judge holds a slot per candidate")
    ap.add_argument("--label", default="", help="a word for the table's title (e.g. before / after)")
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args()
    slot_counts = ns.slots or [1, 2]
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    work = Path(tempfile.mkdtemp(prefix="solforge-sched-"))
    problems = make_problems(work / "problems", ns.problems)
    judge = fake_judge.install(work / "sleep_judge", hold_s=ns.judge_s, first_only=True, hardware="sleep")
    env["SOLFORGE_JUDGE_PYTHON"] = str(judge)
    env["SOLFORGE_JUDGE_SERVER"] = "0"  # the fake judge speaks only the one-shot eval command
    results = []
    for n in slot_counts:
        results.append(run_once(n, problems, ns, work, env))
        print(json.dumps(results[-1]), flush=True)
    base = results[0]
    lines = [
        f"# Scheduling {ns.label} ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, fake judge {ns.judge_s} s, "
        f"{ns.problems} problems, {ns.candidates} candidates)",
        "",
        "| slots | candidates | planner rounds | wall s | window s | judge s | occupancy | ratio (window) "
        "| ratio (wall) | stop |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['slots']} | {r['candidates']} | {r['plans']} | {r['wall_s']:.1f} | {r['window_s']:.1f} "
            f"| {r['judge_s']:.1f} | {r['occupancy']:.0%} | {r['rate'] / base['rate']:.2f}x "
            f"| {(r['candidates'] / r['wall_s']) / (base['candidates'] / base['wall_s']):.2f}x | {r['stop']} |"
        )
    emit_report(lines, ns.out)


if __name__ == "__main__":
    main()
