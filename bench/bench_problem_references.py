"""Run every problem's reference on every workload of a device: does it run, in what time, and how far from
T_SOL is it. Prints a table and writes it to a file.

The eager reference calls the vendor's libraries (cuBLAS GEMMs, SDPA), so a measured time is an upper bound on
the true speed of light: a workload whose T_SOL exceeds it (T_SOL / ref above 1) is an error of the SOL model,
and the summary line counts them.

    python bench/bench_problem_references.py --device cuda -o bench_problem_references.md
    python bench/bench_problem_references.py --problems data/problems kernels_tmp/gen7 --workloads 3 --device cuda
    python bench/bench_problem_references.py --device cpu --smallest --match rmsnorm   # CPU smoke run
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

from sol_bench.inputs import InputContext, make_inputs
from sol_bench.problem import find_problems, load_problem
from sol_bench.reference import load_reference
from sol_bench.timing import time_callable
from solforge.problems.validate import smallest_workload, sol_times

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, nargs="+", default=[ROOT / "data" / "problems"],
                    help="problem directories or directories of problems")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smallest", action="store_true", help="only each problem's smallest workload")
    ap.add_argument("--workloads", type=int, default=0, help="only N workloads, spread smallest to largest by bytes")
    ap.add_argument("--match", default="", help="only problems whose name contains this")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("-o", "--out", type=Path, default=Path("bench_problem_references.md"))
    args = ap.parse_args()
    lines = ["| problem | workload axes | status | ref ms | T_SOL ms | T_SOL / ref |", "| --- | --- | --- | --- | --- | --- |"]
    failed, over_sol, worst = 0, [], 0.0
    for path in (p for root in args.problems for p in find_problems(root)):
        problem = load_problem(path)
        if args.match not in problem.name:
            continue
        if args.workloads:
            problem = problem.select(problem.pick_workloads(args.workloads, "spread"))
        ref = load_reference(problem.definition)
        try:
            sol = sol_times(problem)
        except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on to the next problem
            sol, sol_error = None, f"{type(e).__name__}"
        else:
            sol_error = "n/a"
        by_uuid = {w.uuid: i for i, w in enumerate(problem.workloads)}
        workloads = [smallest_workload(problem)] if args.smallest else list(problem.workloads)
        for w in workloads:
            axes = "x".join(f"{k}={v}" for k, v in w.axes.items())
            t_sol = sol[by_uuid[w.uuid]] if sol else None
            try:
                inputs = make_inputs(problem.definition, w, args.device, 0, reference=ref,
                                     ctx=InputContext(problem_dir=problem.path))  # fmt: skip
                with torch.no_grad():
                    stats = time_callable(lambda: ref.run(*inputs.values()), args.device, warmup=2,
                                          iterations=args.iterations)  # fmt: skip
                ms = stats.median_ms
                status = "ok"
            except Exception as e:  # noqa: BLE001 - a failing reference is a row of the table, not the end
                ms, status = math.nan, f"FAIL {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
                failed += 1
            finally:
                inputs = None
                if args.device.startswith("cuda"):
                    torch.cuda.empty_cache()
            sol_txt = f"{t_sol:.6f}" if t_sol is not None else sol_error
            ratio = f"{t_sol / ms:.3f}" if t_sol is not None and ms == ms and ms > 0 else "-"
            if ratio != "-":
                worst = max(worst, t_sol / ms)
                over_sol += [f"{problem.name} {axes}"] if t_sol > ms else []
            row = f"| {problem.name} | {axes} | {status} | {ms:.4f} | {sol_txt} | {ratio} |"
            lines.append(row)
            print(row, flush=True)
    summary = (f"{len(lines) - 2} workloads, {failed} failed; T_SOL above the measured reference on {len(over_sol)}"
               f" (largest T_SOL / ref {worst:.3f})" + "".join(f"\n- {x}" for x in over_sol))
    text = "\n".join([f"# Reference timings on {args.device} ({time.strftime('%Y-%m-%d %H:%M')})", "", summary, "",
                      *lines, ""])  # fmt: skip
    args.out.write_text(text)
    print(f"{summary}\n-> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
