"""T_b per workload with sol_bench alone (no click or Prefect: what a bare GPU box has), as JSON lines.

The same measurement as ``solforge baseline --json --no-save`` (``sol_bench.baseline``), one record per line
as each workload finishes, so a run cut by a time limit keeps what it measured; ``--resume`` skips the
workloads already in the output. ``bench_offline_agents.py --baselines`` reads the file.

    python bench/measure_tb.py data/problems/L1 --device cuda --timer cupti --max-workloads 1 -o tb_cupti.jsonl
    python bench/measure_tb.py tests/fixtures/problems --device cpu -o /tmp/tb.jsonl   (a CPU check)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sol_bench.baseline import BaselineConfig, measure_workload  # noqa: E402
from sol_bench.errors import ReferenceFailure  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, find_problems, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
from sol_bench.timing import TIMERS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", choices=TIMERS, default="events")
    ap.add_argument("--variants", help="comma-separated subset of sol_bench.baseline's variants [all]")
    ap.add_argument("--max-workloads", type=int, help="only N workloads of each problem (--workload-pick)")
    ap.add_argument("--workload-pick", choices=WORKLOAD_PICKS, default="smallest",
                    help="which N: the smallest by bytes, or spread smallest to largest (one: the median)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the output's records and skip their workloads")
    args = ap.parse_args()
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip()) if args.variants else None
    cfg = BaselineConfig(device=args.device, variants=variants, warmup=args.warmup, iterations=args.iterations,
                         timer=args.timer)  # fmt: skip
    cfg.chosen_variants()  # an unknown variant fails here, before any work
    done = set()
    if args.resume and args.output.exists():
        done = {json.loads(x)["uuid"] for x in args.output.read_text().splitlines() if x.strip()}
    elif not args.resume:
        args.output.write_text("")
    failures = 0
    for root in args.problems:
        for pdir in find_problems(root):
            problem = load_problem(pdir)
            if args.max_workloads:
                problem = problem.select(problem.pick_workloads(args.max_workloads, args.workload_pick))
            reference = load_reference(problem.definition)
            for w in problem.workloads:
                if w.uuid in done:
                    continue
                try:
                    rec = measure_workload(problem, w, reference, cfg)
                except ReferenceFailure as e:
                    failures += 1
                    print(f"{problem.name}/{w.uuid}: {e}", file=sys.stderr, flush=True)
                    continue
                with args.output.open("a") as f:
                    f.write(rec.model_dump_json() + "\n")
                print(f"{problem.name} {w.uuid}: T_b {rec.t_b_ms:.4f} ms ({rec.best_variant}), eager "
                      f"{rec.eager_ms:.4f} ms [{rec.timing_method}]", flush=True)  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
