"""Judge every bundled problem's reference as a candidate, on its smallest workload, and report.

A problem is only as good as its reference: it must pass the judge itself (load, inputs, correctness
rounds with fresh inputs, timed runs verified). Writes a markdown table; exit code 0 iff all PASSED.

Usage:  python scripts/judge_bundled_references.py [--problems data/problems] [--device cpu] [-o FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sol_bench.judge import JudgeConfig, evaluate
from sol_bench.problem import find_problems, load_problem
from solforge.reference_agent import reference_solution


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=Path, default=Path("data/problems"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--match", default="", help="only problems whose name contains this")
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    staging = Path(tempfile.mkdtemp(prefix="judge-refs-"))
    cfg = JudgeConfig(device=args.device, iterations=3, warmup=1, correctness_rounds=2, time_reference=False,
                      staging_root=staging, timeout_s=600)  # fmt: skip
    rows, failed = [], 0
    dirs = [d for d in find_problems(args.problems) if args.match in d.name]
    for i, d in enumerate(dirs, 1):
        problem = load_problem(d)
        problem = problem.select(problem.smallest_workloads(1))
        t0 = time.monotonic()
        trace = evaluate(problem, reference_solution(problem.definition), cfg)[0]
        ev = trace.evaluation
        ok = ev.status.value == "PASSED"
        failed += not ok
        err = f"{ev.correctness.max_absolute_error:.2e}" if ev.correctness else "-"
        rows.append(f"| {problem.name} | {trace.workload.axes} | {ev.status.value} | {err} | "
                    f"{time.monotonic() - t0:.1f} | {(ev.reason or '')[:80]} |")  # fmt: skip
        print(f"[{i}/{len(dirs)}] {rows[-1]}", flush=True)
    text = "\n".join([
        f"# Bundled references judged as candidates ({args.device}, smallest workload, {time.strftime('%Y-%m-%d')})",
        "", f"{len(dirs) - failed} of {len(dirs)} PASSED.", "",
        "| problem | workload | status | max abs error | judge s | reason |", "| --- | --- | --- | --- | --- | --- |",
        *rows,
    ]) + "\n"  # fmt: skip
    if args.out:
        args.out.write_text(text)
    print(text.splitlines()[2])
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
