"""T_b per workload with sol_bench alone (no click or Prefect: what a bare GPU box has), as JSON lines.

The same measurement as ``solforge baseline --json --no-save`` (``sol_bench.baseline.judge_baselines``): each
variant of the reference (eager, torch.compile, either replayed through a CUDA graph) is judged as a candidate,
by the judge's own protocol, sandboxed worker, inputs and timer, so T_b and a candidate's time come from the
same clock and T_b's own code judged as a candidate reads 1.0x. One judge call per variant covers all the
problem's workloads. Records are appended per problem as it finishes, so a run cut by a time limit keeps what
it measured; ``--resume`` skips the workloads already in the output. ``bench_offline_agents.py --baselines``
and ``bench/generalization.py`` read the file.

    python bench/measure_tb.py data/problems/L1 --device cuda --timer cupti --max-workloads 3 \
        --workload-pick spread -o tb.jsonl
    python bench/measure_tb.py tests/fixtures/problems --device cpu -o /tmp/tb.jsonl   (a CPU check)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sol_bench.baseline import BaselineConfig, judge_baselines  # noqa: E402
from sol_bench.errors import InputError  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, find_problems, load_problem  # noqa: E402
from sol_bench.timing import TIMERS  # noqa: E402


def measure_problem(pdir: Path, args: argparse.Namespace, cfg: BaselineConfig, done: set[str]) -> int:
    """Append the records of one problem's workloads to the output; returns how many workloads failed."""
    problem = load_problem(pdir)
    if args.max_workloads:
        problem = problem.select(problem.pick_workloads(args.max_workloads, args.workload_pick))
    todo = [w.uuid for w in problem.workloads if w.uuid not in done]
    if not todo:
        return 0
    records, refused = judge_baselines(problem.select(todo), cfg, lambda line: print(line, flush=True))
    for line in refused.values():
        print(line, file=sys.stderr, flush=True)
    with args.output.open("a") as f:
        f.writelines(rec.model_dump_json() + "\n" for rec in records)
    for rec in records:
        print(f"{problem.name} {rec.uuid}: T_b {rec.t_b_ms:.4f} ms ({rec.best_variant}), eager "
              f"{rec.eager_ms:.4f} ms [{rec.timing_method}]", flush=True)  # fmt: skip
    return len(refused)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", choices=TIMERS, default="events")
    ap.add_argument("--variants", help="comma-separated subset of sol_bench.baseline's variants [all]")
    ap.add_argument("--max-workloads", type=int, help="only N workloads of each problem (--workload-pick)")
    ap.add_argument("--workload-pick", choices=WORKLOAD_PICKS, default="smallest",
                    help="which N: the smallest by bytes, or spread smallest to largest (one: the median)")
    ap.add_argument("--warmup", type=int, default=10, help="the judge's warm-up iterations")
    ap.add_argument("--iterations", type=int, default=50, help="the judge's most timed iterations")
    ap.add_argument("--time-budget", type=float, default=5.0, help="the judge's seconds of timing per workload")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the output's records and skip their workloads")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per variant and problem, compiling included")
    ap.add_argument("--compiles", type=int, default=1,
                    help="fresh compiles of each torch.compile variant, the fastest counts")
    args = ap.parse_args()
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip()) if args.variants else None
    cfg = BaselineConfig(device=args.device, variants=variants, warmup=args.warmup, iterations=args.iterations,
                         min_iterations=min(5, args.iterations), time_budget_s=args.time_budget, timer=args.timer,
                         compiles=args.compiles, staging_root=REPO / "kernels_tmp", timeout_s=args.timeout)  # fmt: skip
    cfg.chosen_variants()  # an unknown variant fails here, before any work
    done = set()
    if args.resume and args.output.exists():
        done = {json.loads(x)["uuid"] for x in args.output.read_text().splitlines() if x.strip()}
    elif not args.resume:
        args.output.write_text("")
    failures = 0
    for root in args.problems:
        for pdir in find_problems(root):
            try:
                failures += measure_problem(pdir, args, cfg, done)
            except Exception as e:  # noqa: BLE001 - a problem that does not load or measure; the rest go on
                failures += 1
                why = str(e) if isinstance(e, InputError) else f"{pdir}: {type(e).__name__}: {e}"
                print(f"skipped: {why}", file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
