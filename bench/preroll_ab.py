"""The judge's CUDA timers, A/B: reference latencies with no pre-roll, with one, and in CUPTI's window.

For each problem's smallest workload, the eager reference and its CUDA-graph replay are timed with the
judge's protocol (``sol_bench.timing.time_callable`` through ``sol_bench.baseline``) with the event timer at
each pre-roll, and with ``--cupti`` also with the CUPTI device window (upstream's first-to-last GPU activity);
the table shows how much host launch time and event overhead each window held.

    python bench/preroll_ab.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda --preroll 0 --preroll 20
    python bench/preroll_ab.py data/problems/L1 --device cuda --preroll 20 --cupti
    python bench/preroll_ab.py tests/fixtures/problems --device cpu --preroll 0   (a CPU check of the script)
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from problem_args import problems_parser  # noqa: E402

from sol_bench.baseline import CUDAGRAPH_EAGER, EAGER, BaselineConfig, measure_workload  # noqa: E402
from sol_bench.problem import find_problems, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402


def main() -> int:
    ap = problems_parser(__doc__)
    ap.add_argument("--preroll", type=float, action="append", required=True, help="pre-roll in µs (repeatable)")
    ap.add_argument("--cupti", action="store_true", help="also time with the CUPTI device window (timer='cupti')")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    variants = (EAGER, CUDAGRAPH_EAGER) if args.device.startswith("cuda") else (EAGER,)
    settings = [("events", p, f"@{p:g} µs") for p in args.preroll] + ([("cupti", 0.0, "cupti")] if args.cupti else [])
    head = " | ".join(f"{v} ms {label}" for _, _, label in settings for v in variants)
    lines = [f"| problem | uuid | {head} |", "|---|---|" + "---:|" * (len(settings) * len(variants))]
    for root in args.problems:
        for pdir in find_problems(root):
            problem = load_problem(pdir)
            workload = next(w for w in problem.workloads if w.uuid in problem.smallest_workloads(1))
            reference = load_reference(problem.definition)
            cells = []
            for timer, pre, _ in settings:
                cfg = BaselineConfig(device=args.device, variants=variants, warmup=5, iterations=args.iterations,
                                     preroll_us=pre, timer=timer)  # fmt: skip
                rec = measure_workload(problem, workload, reference, cfg)
                cells += [f"{rec.variants[v]:.4f}" if v in rec.variants else "–" for v in variants]
            lines.append(f"| {problem.name} | {workload.uuid} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.output:
        args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
