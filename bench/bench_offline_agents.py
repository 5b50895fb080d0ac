"""Run the offline agent over a problems directory, judge every candidate, write a Markdown table.

Each candidate is judged by ``sol_bench.judge.evaluate`` in this process (the candidate itself runs in the
judge's sandboxed worker process, as always), and its statuses and latencies go back to the agent; per problem the
best fully-passing candidate (lowest geomean latency) is reported with its speedup vs
eager, vs T_b (when ``--baselines`` gives T_b per workload uuid) and its median SOL score (T_b known and
the trace carries T_SOL). ``--confirm N`` judges each problem's best N more times (a new worker each) and
reports the median of those runs, since on a GPU a launch-bound candidate's judged time varies from one
worker process to the next and the best of several candidates is otherwise the luckiest draw.

One problem's failure (a directory that does not load, an agent or judge error) is reported in its row
and on stderr, and the other problems still run; the exit status is then 1.

    python bench/bench_offline_agents.py tests/fixtures/problems --device cpu --max-candidates 3 -o /tmp/t.md
    python bench/bench_offline_agents.py data/problems --device cuda --max-candidates 24 -o docs/offline_h200.md
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.base import AttemptFeedback, WorkloadFeedback  # noqa: E402
from agents.offline.agent import OfflineAgent  # noqa: E402
from sol_bench.errors import JudgeError  # noqa: E402
from sol_bench.judge import TOLD_PREFIX, JudgeConfig, evaluate  # noqa: E402
from sol_bench.models import Solution  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, Problem, find_problems, load_problem  # noqa: E402
from sol_bench.score import sol_score  # noqa: E402
from sol_bench.timing import LAUNCH_PREROLL_US, TIMERS  # noqa: E402
from sol_bench.worker import BUFFER_MODES  # noqa: E402


@dataclass
class Result:
    name: str
    statuses: list[str]
    speedups: list[float]
    vs_tb: list[float]
    sol: list[float]
    latencies: dict[str, float] = field(default_factory=dict)  # workload uuid -> T_k ms
    reasons: list[str] = field(default_factory=list)  # one line per failed workload: status and the judge's why
    seconds: float = 0.0  # the judge's wall time for this candidate
    host_bound: dict[str, float] = field(default_factory=dict)  # workload uuid -> share of host-bound timed calls
    t_sol: dict[str, float] = field(default_factory=dict)  # workload uuid -> T_SOL ms
    told: list[str] = field(default_factory=list)  # the candidate's own lines on what it chose (``TOLD_PREFIX``)

    @property
    def passed(self) -> bool:
        return bool(self.statuses) and all(s == "PASSED" for s in self.statuses)


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def judge(problem: Problem, solution_json: str, config: JudgeConfig, baselines: dict[str, float]) -> Result:
    """Judge one candidate with the judge in this (trusted) process: the candidate still runs in the
    judge's sandboxed worker process, and this saves a judge start (torch import, CUDA context) per
    candidate."""
    name = json.loads(solution_json)["name"]
    t0 = time.monotonic()
    try:
        traces = [t.model_dump(mode="json") for t in evaluate(problem, Solution.model_validate_json(solution_json), config)]
    except Exception as e:  # noqa: BLE001 - JudgeError above all; one candidate's judge failure is its row
        kind = "JUDGE_ERROR" if isinstance(e, JudgeError) else type(e).__name__
        first = (str(e).splitlines() or [""])[0][:120]
        return Result(name, [f"{kind}({first})"], [], [], [], reasons=[f"{kind}: {first}"],
                      seconds=time.monotonic() - t0)  # fmt: skip
    res = Result(name, [], [], [], [], seconds=time.monotonic() - t0)
    for trace in traces:
        ev = trace["evaluation"]
        res.statuses.append(ev["status"])
        res.told += [x for x in (ev.get("log") or "").splitlines() if x.startswith(TOLD_PREFIX)]
        if ev["status"] != "PASSED":
            res.reasons.append(f'{ev["status"]}: {(ev.get("reason") or ev.get("log") or "")[-300:]}')
        perf = ev.get("performance") or {}
        t_k = perf.get("latency_ms")
        if not t_k:
            continue
        res.speedups.append(perf["speedup_factor"])
        res.latencies[trace["workload"]["uuid"]] = t_k
        if perf.get("host_bound_fraction") is not None:
            res.host_bound[trace["workload"]["uuid"]] = perf["host_bound_fraction"]
        t_b = baselines.get(trace["workload"]["uuid"])
        if t_b:
            res.vs_tb.append(t_b / t_k)
        if ev.get("t_sol_ms") is not None:
            res.t_sol[trace["workload"]["uuid"]] = ev["t_sol_ms"]
        if t_b and ev.get("t_sol_ms") is not None:
            res.sol.append(sol_score(t_k, t_b, ev["t_sol_ms"]).sol_score)
    return res


def confirm(problem: Problem, best: Result, solution_json: str, n: int, config: JudgeConfig,
            baselines: dict[str, float]) -> tuple[Result, list[dict[str, float]]]:  # fmt: skip
    """``best`` judged ``n`` more times; a Result whose latencies are the per-workload medians over the
    passing runs (the first included), and every run's latencies (a failed run: its statuses)."""
    runs = [best] + [judge(problem, solution_json, config, baselines) for _ in range(n)]
    ok = [r for r in runs if r.passed]
    lat = {u: statistics.median(r.latencies[u] for r in ok if u in r.latencies) for u in best.latencies}
    res = Result(best.name, list(best.statuses), [], [], [], lat, sum(r.seconds for r in runs), best.host_bound, best.t_sol)
    res.speedups = [statistics.median(x for r in ok if (x := geomean(r.speedups)))]
    for u, t_k in lat.items():
        t_b = baselines.get(u)
        if t_b:
            res.vs_tb.append(t_b / t_k)
            if u in best.t_sol:
                res.sol.append(sol_score(t_k, t_b, best.t_sol[u]).sol_score)
    return res, [r.latencies if r.passed else {"failed": r.statuses, "reasons": r.reasons} for r in runs]


def likely_candidates(
    problem: Problem, device: str, n: int, only_groups: tuple[str, ...] = (), probe_on: Problem | None = None
) -> list[Solution]:
    """The first ``n`` candidates the agent proposes if every one passes in the same time: the templates'
    first variants, then the first template's grid neighbours (real latencies may steer elsewhere later).
    Exports are left out: only C++ candidates are prebuilt, and an export runs Inductor. ``probe_on``: the
    problem whose workloads check the template bindings (``OfflineAgent.probe_with``)."""
    agent, history = OfflineAgent(max_candidates=n, plan_exports=False, only_groups=only_groups), []
    if probe_on is not None:
        agent.probe_with(probe_on)
    while (cand := agent.propose(problem, history, device)) is not None:
        fb = tuple(WorkloadFeedback(w.uuid, "PASSED", latency_ms=1.0) for w in problem.workloads)
        history.append(AttemptFeedback(cand.solution.name, cand.solution, fb))
    return [a.solution for a in history]


def prebuild(
    problems: list, device: str, per_problem: int, jobs: int, timeout_s: float = 600.0, only_groups: tuple[str, ...] = (),
    probe_on: Mapping[str, Problem] | None = None,
) -> None:
    """Build the C++/CUDA candidates the agent will try first, ``jobs`` at once, into the judge's build cache.

    The judge caches builds by source hash under its staging root (``kernels_tmp``, relative to the repo,
    as ``sol_bench eval`` uses), so the sequential judging below finds them built. Candidates that later
    depend on feedback are simply built on demand.
    """
    probe_on = probe_on or {}
    todo = []
    for problem in problems:
        try:
            todo += likely_candidates(problem, device, per_problem, only_groups, probe_on.get(problem.name))
        except Exception as e:  # noqa: BLE001 - judged later, where the error is reported in the problem's row
            print(f"{problem.name}: not prebuilt: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    build_all(todo, device, jobs, timeout_s)


def build_all(solutions: list[Solution], device: str, jobs: int, timeout_s: float = 600.0) -> None:
    """Build the C++/CUDA ones of ``solutions``, ``jobs`` at once, into the judge's build cache."""
    from concurrent.futures import ThreadPoolExecutor

    from sol_bench.build import plan_build, run_build
    from sol_bench.errors import CandidateTimeout, CompileFailure
    from sol_bench.runner import candidate_env
    from sol_bench.staging import stage

    todo = [sol for sol in solutions if sol.spec.is_cpp]

    def build(sol) -> str:
        staged = stage(sol, REPO / "kernels_tmp")
        try:
            r = run_build(plan_build(sol, staged, device, candidate_env(staged, device)), timeout_s)
            return f"built {sol.name} in {r.seconds:.0f} s" if not r.cached else f"cached {sol.name}"
        except (CompileFailure, CandidateTimeout) as e:
            return f"failed {sol.name}: {str(e).splitlines()[-1:]}"

    print(f"prebuilding {len(todo)} C++ candidates, {jobs} at once", flush=True)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for line in pool.map(build, todo):
            print(line, flush=True)


def fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "–" if x is None else f"{x:{spec}}{suffix}"


def load_baselines(path: Path | None) -> dict[str, float]:
    """T_b per workload uuid from a JSON object (uuid -> ms) or from ``solforge baseline --json`` lines."""
    if path is None:
        return {}
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "uuid" not in data:
        return {str(k): float(v) for k, v in data.items()}
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rec = json.loads(line)
                out[rec["uuid"]] = float(rec["t_b_ms"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise SystemExit(f"{path}:{n}: not a baseline record with 'uuid' and 't_b_ms' ({e})") from None
    return out


def summary(records: list[dict], title: str) -> str:
    rows, best_speedups, best_tb, best_sol = [], [], [], []
    for r in records:
        n_pass = f"{r['passed']}/{r['tried']}"
        if r.get("best") is None:
            why = f"failed: {r['error'][:120]}" if r.get("error") else "none passed"
            rows.append(f"| {r['problem']} | – ({why.replace('|', '/')}) | {n_pass} | – | – | – |")
            continue
        g, tb, sol = r.get("speedup"), r.get("vs_tb"), r.get("sol_score")
        best_speedups += [g] if g else []
        best_tb += [tb] if tb else []
        best_sol += [sol] if sol is not None else []
        rows.append(f"| {r['problem']} | {r['best']} | {n_pass} | {fmt(g, suffix='×')} | {fmt(tb, suffix='×')} "
                    f"| {fmt(sol)} |")  # fmt: skip
    median_sol = statistics.median(best_sol) if best_sol else None  # an even count: the mean of the two middle
    beat_tb = sum(x > 1 for x in best_tb)
    return "\n".join([
        title,
        "",
        f"- problems: {len(rows)}; geomean speedup vs eager: {fmt(geomean(best_speedups), suffix='×')}; "
        f"vs T_b: {fmt(geomean(best_tb), suffix='×')} ({beat_tb}/{len(best_tb)} beat T_b); "
        f"median SOL score: {fmt(median_sol)}",
        "",
        "| problem | best candidate | passing/tried | speedup vs eager | vs T_b | median SOL score |",
        "|---|---|---|---|---|---|",
        *rows,
    ]) + "\n"  # fmt: skip


def run_problem(problem: Problem, whole: Problem, args: argparse.Namespace, config: JudgeConfig,
                baselines: dict[str, float]) -> dict:  # fmt: skip
    """The offline agent's candidates for one problem, judged; its record. An agent that raises ends this
    problem's search with what was judged so far, its error in the record."""
    agent = OfflineAgent(max_candidates=args.max_candidates, only_groups=tuple(args.only_groups))
    agent.probe_with(whole)
    history: list[AttemptFeedback] = []
    results: list[Result] = []
    sources: dict[str, str] = {}
    failed: dict[str, str] = {}
    t0 = time.monotonic()
    while True:
        try:
            cand = agent.propose(problem, history, args.device)
        except Exception as e:  # noqa: BLE001 - planning failed; keep what was judged
            failed["error"] = f"agent: {type(e).__name__}: {e}"
            print(f"{problem.name}: {failed['error']}", file=sys.stderr, flush=True)
            break
        if cand is None:
            break
        sources[cand.solution.name] = cand.solution.model_dump_json()
        r = judge(problem, sources[cand.solution.name], config, baselines)
        results.append(r)
        fb = tuple(WorkloadFeedback(w.uuid, s, latency_ms=r.latencies.get(w.uuid))  # the search climbs on these
                   for w, s in zip(problem.workloads, r.statuses))
        history.append(AttemptFeedback(cand.solution.name, cand.solution, fb))
        lat = ", ".join(f"{v:.4f}" for v in r.latencies.values())
        print(f"{problem.name}: {cand.solution.name}: {sorted(set(r.statuses))} "
              f"speedup {fmt(geomean(r.speedups))} T_k ms {lat or '–'} ({r.seconds:.0f} s)", flush=True)  # fmt: skip
        for why in dict.fromkeys(r.reasons):
            print(f"  {why}", flush=True)
        if args.problem_seconds and time.monotonic() - t0 > args.problem_seconds:
            break
    # what the agent planned but never offered, and why: an export Inductor refused, a precheck that missed the
    # tolerance against eager (the subgraph candidate among them)
    skipped = {**{n: f"not exported: {why}" for n, why in agent.not_exported(problem).items()},
               **{n: f"numerics: {why}" for n, why in agent.numerics_rejected(problem).items()}}  # fmt: skip
    skipped = {name.removeprefix(problem.name + "__"): why for name, why in skipped.items()}
    for name, why in skipped.items():
        print(f"{problem.name}: {name}: skipped, {why}", flush=True)
    # why each candidate that did not pass failed (the judge's reasons, a few and short): the record explains itself
    why = {r.name.removeprefix(problem.name + "__"): [w[:300] for w in dict.fromkeys(r.reasons)][:3]
           for r in results if not r.passed and r.reasons}  # fmt: skip
    notes = {**failed, **({"skipped": skipped} if skipped else {}), **({"why_failed": why} if why else {})}
    passing = [r for r in results if r.passed]
    # the fastest by the judge's latency: the eager time behind speedup is re-measured (and noisy) per run
    best = min(passing, key=lambda r: geomean(list(r.latencies.values())) or math.inf, default=None)
    statuses = {r.name.removeprefix(problem.name + "__"): sorted(set(r.statuses)) for r in results}
    if best is None:
        return {"problem": problem.name, "best": None, "passed": 0, "tried": len(results), "statuses": statuses,
                **notes}
    runs_ms = None
    if args.confirm > 0:
        best, runs_ms = confirm(problem, best, sources[best.name], args.confirm, config, baselines)
        print(f"{problem.name}: {best.name} judged {len(runs_ms)} times, ms: "
              + " ".join("failed" if "failed" in x else f"{geomean(list(x.values())):.4f}" for x in runs_ms),
              flush=True)  # fmt: skip
        for why in dict.fromkeys(w for x in runs_ms for w in x.get("reasons", [])):
            print(f"  {why}", flush=True)
    sol = sorted(best.sol)[len(best.sol) // 2] if best.sol else None
    return {"problem": problem.name, "best": best.name.removeprefix(problem.name + "__"), "passed": len(passing),
            "tried": len(results), "speedup": geomean(best.speedups), "vs_tb": geomean(best.vs_tb),
            "sol_score": sol, "latencies_ms": best.latencies,
            "tried_ms": {r.name.removeprefix(problem.name + "__"): r.latencies for r in results}, "statuses": statuses,
            "host_bound": best.host_bound, **({"runs_ms": runs_ms} if runs_ms else {}),
            "told": {r.name.removeprefix(problem.name + "__"): r.told for r in results if r.told}, **notes}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-candidates", type=int, default=16)
    ap.add_argument("--problem-seconds", type=float,
                    help="no new candidate for a problem after this many seconds on it (the running one finishes)")
    ap.add_argument("--timeout", type=int, default=120, help="the judge's limit per workload, seconds")
    ap.add_argument("--baselines", type=Path,
                    help="T_b per workload: a JSON object uuid -> ms, or the JSON lines of solforge baseline --json")
    ap.add_argument("--max-workloads", type=int, help="judge only N workloads of each problem (--workload-pick)")
    ap.add_argument("--workload-pick", choices=WORKLOAD_PICKS, default="smallest",
                    help="which N: the smallest by bytes, or spread smallest to largest (one: the median)")
    ap.add_argument("--preroll-us", type=float, default=LAUNCH_PREROLL_US,
                    help="the judge's CUDA launch pre-roll (sol_bench.timing); 0 opens the window at the host call")
    ap.add_argument("--buffers", choices=BUFFER_MODES, default="shared",
                    help="the candidates' buffers in the judge (JudgeConfig.buffers): the judge's or their own copies")
    ap.add_argument("--timer", choices=TIMERS, default="events",
                    help="the judge's CUDA timer (sol_bench.timing.TIMERS); --baselines should use the same one")
    ap.add_argument("-o", "--output", type=Path, default=Path("offline_agents.md"))
    ap.add_argument("--prebuild-jobs", type=int, default=0,
                    help="build the first candidates' C++ sources this many at once before judging (GPU runs)")
    ap.add_argument("--only-groups", type=lambda v: [g for g in v.split(",") if g], default=[],
                    help="plan only candidate groups starting with these, comma-separated (e.g. reference/exported)")
    ap.add_argument("--json-out", type=Path, help="also write one JSON object per problem here (for merging runs)")
    ap.add_argument("--resume", action="store_true",
                    help="keep --json-out's problems and skip them (a run cut by a time limit goes on)")
    ap.add_argument("--confirm", type=int, default=0,
                    help="judge each problem's best N more times and report the median (default %(default)s)")
    args = ap.parse_args()
    if args.resume and not args.json_out:
        ap.error("--resume needs --json-out")

    baselines = load_baselines(args.baselines)
    records: list[dict] = []
    if args.json_out:
        if args.resume and args.json_out.exists():
            records = [json.loads(x) for x in args.json_out.read_text().splitlines() if x.strip()]
        else:
            args.json_out.write_text("")
    done = {r["problem"] for r in records}

    def save(record: dict) -> None:
        """One line per problem as soon as it is done, so a run cut by a time limit keeps what it finished."""
        records.append(record)
        if args.json_out:
            with args.json_out.open("a") as f:
                f.write(json.dumps(record) + "\n")

    config = JudgeConfig(device=args.device, timeout_s=float(args.timeout), staging_root=REPO / "kernels_tmp",
                         launch_preroll_us=args.preroll_us, timer=args.timer, buffers=args.buffers)  # fmt: skip
    problems = []
    for d in (d for root in args.problems for d in find_problems(root)):
        try:
            problems.append(load_problem(d))
        except Exception as e:  # noqa: BLE001 - reported in its row; the other problems run
            print(f"skipped: {e}", file=sys.stderr, flush=True)
            if str(d) not in done:
                save({"problem": str(d), "best": None, "passed": 0, "tried": 0, "error": str(e)})
    problems = [p for p in problems if p.name not in done]
    whole = {p.name: p for p in problems}  # templates bind on the smallest workloads, whichever are judged
    if args.max_workloads:
        problems = [p.select(p.pick_workloads(args.max_workloads, args.workload_pick)) for p in problems]
    if args.prebuild_jobs:
        prebuild(problems, args.device, args.max_candidates, args.prebuild_jobs, only_groups=tuple(args.only_groups),
                 probe_on=whole)
    for problem in problems:
        try:
            save(run_problem(problem, whole[problem.name], args, config, baselines))
        except Exception as e:  # noqa: BLE001 - one problem's failure must not end the bench
            print(f"{problem.name}: failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            save({"problem": problem.name, "best": None, "passed": 0, "tried": 0, "error": f"{type(e).__name__}: {e}"})

    text = summary(records, f"# Offline agents on {', '.join(map(str, args.problems))} ({args.device})")
    args.output.write_text(text)
    print(text)
    return 1 if any(r.get("error") for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
