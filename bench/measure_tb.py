"""T_b per workload with sol_bench alone (no click or Prefect: what a bare GPU box has), as JSON lines.

The same measurement as ``solforge baseline --json --no-save`` (``sol_bench.baseline``), one record per line
as each workload finishes, so a run cut by a time limit keeps what it measured; ``--resume`` skips the
workloads already in the output. ``bench_offline_agents.py --baselines`` reads the file.

``--protocol judge`` times the same variants the way the judge times a candidate instead: each variant is
the reference wrapped as a pytorch-language solution (``agents.offline.compiled``: eager, torch.compile,
either replayed through a CUDA graph) and judged by ``sol_bench.judge.evaluate``, in the sandboxed worker
process with the judge's rotating input sets, refills and L2 flush; the record's ``eager_ms`` is then the
judge's own eager reference timing. It exists because the same Inductor kernel has read 0.3-0.4 µs slower in
the judge than in-process; on nine bundled problems on an H200 the two protocols disagree both ways
(-15% to +33%), and a judged graph variant also pays a copy into the judge's output buffers, so neither is
the cleaner T_b: the benches report against the in-process one and keep this one beside it.

    python bench/measure_tb.py data/problems/L1 --device cuda --timer cupti --max-workloads 1 -o tb_cupti.jsonl
    python bench/measure_tb.py tests/fixtures/problems --device cpu -o /tmp/tb.jsonl   (a CPU check)
    python bench/measure_tb.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda --timer cupti \
        --max-workloads 1 --protocol judge --variants compile-default,cudagraph-compile-default -o tb_judged.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sol_bench.baseline import (  # noqa: E402
    CUDAGRAPH_COMPILE, CUDAGRAPH_EAGER, COMPILE_DEFAULT, COMPILE_MAX_AUTOTUNE, EAGER, BaselineConfig, BaselineRecord,
    measure_workload,
)
from sol_bench.errors import InputError, ReferenceFailure  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, Problem, find_problems, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
from sol_bench.timing import TIMERS  # noqa: E402

PROTOCOLS = ("in-process", "judge")


def judged_variants() -> dict:
    """sol_bench.baseline's variant -> the same call of the reference as a candidate (a CompileVariant)."""
    from agents.offline import compiled

    by_name = {v.name: v for v in compiled.VARIANTS}
    return {
        EAGER: compiled.EAGER,
        COMPILE_DEFAULT: by_name["inductor_default"],
        COMPILE_MAX_AUTOTUNE: by_name["inductor_max_autotune"],
        CUDAGRAPH_EAGER: compiled.CompileVariant("eager_cudagraph", cuda_graph=True, needs_gpu=True),
        CUDAGRAPH_COMPILE: by_name["inductor_cudagraph"],
    }


def judge_problem(problem: Problem, variants: tuple[str, ...], config) -> tuple[list[BaselineRecord], list[str]]:
    """Every variant judged as a candidate on every workload of ``problem``: one record per workload with at
    least one passing variant (T_b = the fastest), and a line per workload none passed."""
    from datetime import datetime, timezone

    import torch

    from agents.offline import compiled
    from sol_bench.judge import evaluate

    table = judged_variants()
    times: dict[str, dict[str, float]] = {w.uuid: {} for w in problem.workloads}
    iqrs: dict[str, dict[str, float]] = {w.uuid: {} for w in problem.workloads}
    failed: dict[str, dict[str, str]] = {w.uuid: {} for w in problem.workloads}
    eager: dict[str, float] = {}
    methods: dict[str, str] = {}
    device_name = "cpu"
    for name in variants:
        for trace in evaluate(problem, compiled.solution(problem, table[name]), config):
            ev, uuid = trace.evaluation, trace.workload.uuid
            perf = ev.performance
            if ev.status.value != "PASSED" or perf is None:
                failed[uuid][name] = f"{ev.status.value}: {(ev.reason or ev.log or '')[-300:]}"
                continue
            times[uuid][name] = perf.latency_ms
            iqrs[uuid][name] = perf.latency_iqr_ms or 0.0
            eager.setdefault(uuid, perf.reference_latency_ms)
            methods[uuid] = f"judge:{perf.timing_method}"
            device_name = (ev.environment.hardware if ev.environment else None) or device_name
    records, missing = [], []
    for w in problem.workloads:
        t = times[w.uuid]
        if not t:
            missing.append(f"{problem.name}/{w.uuid}: no variant passed the judge: {failed[w.uuid]}")
            continue
        best = min(t, key=t.__getitem__)
        records.append(BaselineRecord(
            problem=problem.name, uuid=w.uuid, device_name=device_name, eager_ms=eager[w.uuid], t_b_ms=t[best],
            best_variant=best, variants=t, iqr_ms=iqrs[w.uuid], failed=failed[w.uuid],
            torch_version=torch.__version__, timestamp=datetime.now(timezone.utc).isoformat(),
            timing_method=methods[w.uuid],
        ))  # fmt: skip
    return records, missing


def measure_problem(pdir: Path, args: argparse.Namespace, cfg: BaselineConfig, judge_cfg, done: set[str]) -> int:
    """Append the records of one problem's workloads to the output; returns how many workloads failed."""
    failures = 0
    problem = load_problem(pdir)
    if args.max_workloads:
        problem = problem.select(problem.pick_workloads(args.max_workloads, args.workload_pick))
    if judge_cfg is not None:
        todo = [w.uuid for w in problem.workloads if w.uuid not in done]
        if not todo:
            return 0
        records, missing = judge_problem(problem.select(todo), cfg.chosen_variants(), judge_cfg)
        for line in missing:
            failures += 1
            print(line, file=sys.stderr, flush=True)
        for rec in records:
            with args.output.open("a") as f:
                f.write(rec.model_dump_json() + "\n")
            print(f"{problem.name} {rec.uuid}: T_b {rec.t_b_ms:.4f} ms ({rec.best_variant}), eager "
                  f"{rec.eager_ms:.4f} ms [{rec.timing_method}]", flush=True)  # fmt: skip
        return failures
    reference = load_reference(problem.definition)
    for w in problem.workloads:
        if w.uuid in done:
            continue
        try:
            rec = measure_workload(problem, w, reference, cfg)
        except Exception as e:  # noqa: BLE001 - one workload's failure is reported; the others are measured
            failures += 1
            why = str(e) if isinstance(e, ReferenceFailure) else f"{type(e).__name__}: {e}"
            print(f"{problem.name}/{w.uuid}: {why}", file=sys.stderr, flush=True)
            continue
        with args.output.open("a") as f:
            f.write(rec.model_dump_json() + "\n")
        print(f"{problem.name} {w.uuid}: T_b {rec.t_b_ms:.4f} ms ({rec.best_variant}), eager "
              f"{rec.eager_ms:.4f} ms [{rec.timing_method}]", flush=True)  # fmt: skip
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", choices=TIMERS, default="events")
    ap.add_argument("--variants", help="comma-separated subset of sol_bench.baseline's variants [all]")
    ap.add_argument("--max-workloads", type=int, help="only N workloads of each problem (--workload-pick)")
    ap.add_argument("--workload-pick", choices=WORKLOAD_PICKS, default="smallest",
                    help="which N: the smallest by bytes, or spread smallest to largest (one: the median)")
    ap.add_argument("--warmup", type=int, default=5, help="in-process protocol (the judge uses its own counts)")
    ap.add_argument("--iterations", type=int, default=30, help="in-process protocol (the judge uses its own counts)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="keep the output's records and skip their workloads")
    ap.add_argument("--protocol", choices=PROTOCOLS, default="in-process",
                    help="time the variants in this process (sol_bench.baseline) or as candidates of the judge")
    ap.add_argument("--timeout", type=float, default=120.0, help="judge protocol: seconds per workload and variant")
    ap.add_argument("--compiles", type=int, default=1,
                    help="in-process protocol: fresh compiles of each torch.compile variant, the fastest counts")
    args = ap.parse_args()
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip()) if args.variants else None
    cfg = BaselineConfig(device=args.device, variants=variants, warmup=args.warmup, iterations=args.iterations,
                         timer=args.timer, compiles=args.compiles)  # fmt: skip
    cfg.chosen_variants()  # an unknown variant fails here, before any work
    done = set()
    if args.resume and args.output.exists():
        done = {json.loads(x)["uuid"] for x in args.output.read_text().splitlines() if x.strip()}
    elif not args.resume:
        args.output.write_text("")
    failures = 0
    judge_cfg = None
    if args.protocol == "judge":
        from sol_bench.judge import JudgeConfig

        # the judge's own warm-up and iteration counts, as bench_offline_agents.py judges candidates
        judge_cfg = JudgeConfig(device=args.device, timeout_s=args.timeout, staging_root=REPO / "kernels_tmp",
                                timer=args.timer)  # fmt: skip
    for root in args.problems:
        for pdir in find_problems(root):
            try:
                failures += measure_problem(pdir, args, cfg, judge_cfg, done)
            except Exception as e:  # noqa: BLE001 - a problem that does not load or measure; the rest go on
                failures += 1
                why = str(e) if isinstance(e, InputError) else f"{pdir}: {type(e).__name__}: {e}"
                print(f"skipped: {why}", file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
