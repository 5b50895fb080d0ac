"""Does where the candidate's buffers live change its judged time? Named candidates judged in alternating rounds.

``JudgeConfig.buffers`` decides what the sandboxed worker calls the candidate with: ``shared``, the judge's
tensors mapped into the worker's process (CUDA IPC on a GPU), or ``private``, the worker's own copies, filled
before and emptied after each call outside the timed window (``sol_bench.worker.BufferSets``). T_b is timed on
the judge's own memory. Each candidate (one per problem: the ``best`` of ``--records``, bench_offline_agents
``--json-out`` files merged as ``offline_table.py`` merges them, or ``--candidate PROBLEM=NAME``) is judged once
per entry of ``--rounds``, in that order, so drift on the device hits both modes alike. Writes a table (each
mode's median T_k per problem and the difference) and, with ``--json-out PREFIX``, one records file per mode
(``PREFIX_<mode>.jsonl``, bench_offline_agents' format) for ``offline_table.py``.

    python bench/buffers_ab.py data/problems --records docs/bench/h200_bundled_set.jsonl \\
        --device cuda --timer cupti --rounds shared,private,shared,private -o /tmp/ab.md --json-out /tmp/ab
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_offline_agents import build_all, geomean, judge, load_baselines  # noqa: E402
from offline_table import merged_records  # noqa: E402

from agents.offline.agent import plan  # noqa: E402
from agents.offline.templates.probe import Probe  # noqa: E402
from sol_bench.judge import JudgeConfig  # noqa: E402
from sol_bench.models import Solution  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, Problem, find_problems, load_problem  # noqa: E402
from sol_bench.score import sol_score  # noqa: E402
from sol_bench.timing import TIMERS  # noqa: E402
from sol_bench.worker import BUFFER_MODES  # noqa: E402


def wanted(records: list[Path], pairs: list[str]) -> dict[str, str]:
    """problem -> candidate name (without the problem prefix): the records' best, then ``PROBLEM=NAME`` pairs."""
    out = {name: rec["best"] for name, (rec, _) in merged_records(records).items() if rec.get("best")}
    for pair in pairs:
        problem, sep, cand = pair.partition("=")
        if not sep or not problem or not cand:
            raise SystemExit(f"--candidate {pair!r}: expected PROBLEM=NAME")
        out[problem] = cand
    return out


def find_solution(problem: Problem, whole: Problem, device: str, name: str) -> Solution:
    """The planned candidate called ``<problem>__<name>``, its templates bound on ``whole``'s workloads."""
    full = f"{problem.name}__{name}"
    for planned in plan(problem, device, probe=Probe(whole)):
        if planned.name == full:
            return planned.solution
    raise LookupError(f"{problem.name}: no planned candidate named {name!r} (renamed since the records?)")


def table(rows: list[dict], modes: list[str]) -> str:
    a, b = modes[0], modes[-1]
    lines = [f"# Judged T_k by the candidates' buffers: {', '.join(modes)}", "",
             f"| problem | candidate | {' | '.join(f'{m} µs (runs)' for m in modes)} | {b} − {a} µs | {b} / {a} |",
             "|---|---|" + "---:|" * (len(modes) + 2)]  # fmt: skip
    ratios = []
    for r in rows:
        med = {m: r["median_us"].get(m) for m in modes}
        cells = []
        for m in modes:
            runs = " ".join(f"{x:.2f}" for x in r["runs_us"].get(m, []))
            cells.append("–" if med[m] is None else f"{med[m]:.2f} ({runs})")
        if med[a] and med[b]:
            ratios.append(med[b] / med[a])
            diff, ratio = f"{med[b] - med[a]:+.2f}", f"{med[b] / med[a]:.3f}"
        else:
            diff = ratio = "–"
        lines.append(f"| {r['problem']} | {r['candidate']} | {' | '.join(cells)} | {diff} | {ratio} |")
    if ratios:
        lines += ["", f"Geomean {b} / {a}: {geomean(ratios):.3f} over {len(ratios)} problems."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--records", type=Path, nargs="*", default=[], help="bench_offline_agents --json-out files")
    ap.add_argument("--candidate", action="append", default=[], help="PROBLEM=NAME (repeatable; after --records)")
    ap.add_argument("--rounds", default="shared,private,shared,private",
                    help="buffer modes in judging order, comma-separated (default %(default)s)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", choices=TIMERS, default="cupti")
    ap.add_argument("--timeout", type=int, default=120, help="the judge's limit per workload, seconds")
    ap.add_argument("--max-workloads", type=int, default=1)
    ap.add_argument("--workload-pick", choices=WORKLOAD_PICKS, default="smallest")
    ap.add_argument("--baselines", type=Path, nargs="*", default=[], help="T_b records (later files win)")
    ap.add_argument("--prebuild-jobs", type=int, default=8)
    ap.add_argument("-o", "--output", type=Path, default=Path("buffers_ab.md"))
    ap.add_argument("--json-out", type=str, help="records prefix: PREFIX_<mode>.jsonl per mode")
    args = ap.parse_args()
    modes = [m for m in args.rounds.split(",") if m]
    bad = [m for m in modes if m not in BUFFER_MODES]
    if bad or not modes:
        ap.error(f"--rounds: {bad or 'empty'}; modes are {', '.join(BUFFER_MODES)}")
    order = list(dict.fromkeys(modes))

    names = wanted(args.records, args.candidate)
    problems = {d.name: load_problem(d) for root in args.problems for d in find_problems(root) if d.name in names}
    missing = sorted(set(names) - set(problems))
    if missing:
        raise SystemExit(f"no problem directory for {missing}")
    baselines: dict[str, float] = {}
    for path in args.baselines:
        baselines.update(load_baselines(path))
    chosen = []
    for name, cand in names.items():
        whole = problems[name]
        problem = whole
        if args.max_workloads:
            problem = whole.select(whole.pick_workloads(args.max_workloads, args.workload_pick))
        try:
            chosen.append((problem, cand, find_solution(problem, whole, args.device, cand)))
        except LookupError as e:  # one renamed candidate costs its row, not the run
            print(f"skipped: {e}", flush=True)
    build_all([sol for _, _, sol in chosen], args.device, args.prebuild_jobs)

    configs = {m: JudgeConfig(device=args.device, timeout_s=float(args.timeout), staging_root=REPO / "kernels_tmp",
                              timer=args.timer, buffers=m) for m in order}  # fmt: skip
    rows, records = [], {m: [] for m in order}
    for problem, cand, sol in chosen:
        doc = sol.model_dump_json()
        runs = {m: [] for m in order}
        for m in modes:
            t0 = time.monotonic()
            r = judge(problem, doc, configs[m], baselines)
            runs[m].append(r)
            lat = ", ".join(f"{v * 1e3:.2f}" for v in r.latencies.values()) or "–"
            took = time.monotonic() - t0
            print(f"{problem.name}: {cand} [{m}] {sorted(set(r.statuses))} T_k µs {lat} ({took:.0f} s)", flush=True)
            for why in dict.fromkeys(r.reasons):
                print(f"  {why}", flush=True)
        row = {"problem": problem.name, "candidate": cand, "runs_us": {}, "median_us": {}}
        for m in order:
            ok = [r for r in runs[m] if r.passed]
            per_run = [geomean(list(r.latencies.values())) for r in ok]
            row["runs_us"][m] = [x * 1e3 for x in per_run if x]
            row["median_us"][m] = statistics.median(row["runs_us"][m]) if row["runs_us"][m] else None
            if not ok:
                records[m].append({"problem": problem.name, "best": None, "passed": 0, "tried": len(runs[m])})
                continue
            lat = {u: statistics.median(r.latencies[u] for r in ok if u in r.latencies) for u in ok[0].latencies}
            t_sol = ok[0].t_sol
            vs_tb = [baselines[u] / t for u, t in lat.items() if u in baselines]
            sols = [sol_score(t, baselines[u], t_sol[u]).sol_score
                    for u, t in lat.items() if u in baselines and u in t_sol]
            records[m].append({"problem": problem.name, "best": cand, "passed": 1, "tried": 1, "buffers": m,
                               "speedup": geomean([x for r in ok for x in r.speedups]), "vs_tb": geomean(vs_tb),
                               "sol_score": statistics.median(sols) if sols else None, "latencies_ms": lat,
                               "runs_ms": [r.latencies for r in ok]})  # fmt: skip
        rows.append(row)
        args.output.write_text(table(rows, order))  # after every problem: a cut run keeps what it measured
        if args.json_out:
            for m in order:
                Path(f"{args.json_out}_{m}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in records[m]))
    print(table(rows, order), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
