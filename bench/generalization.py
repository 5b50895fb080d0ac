"""How solforge does on problems nobody tuned for: T_b, the offline agent and a summary over a problem set.

Meant for a set made by ``solforge problems generate`` with a seed not used while writing or tuning kernels,
measured beside the bundled set. Three steps, each resumable (a run cut by a time limit goes on where it
stopped), each a subprocess so one step's crash is recorded and the others still run:

1. ``tb``: T_b of the chosen workloads (``bench/measure_tb.py``: each variant judged as a candidate, the judge's timer).
2. ``agents``: the offline agent's candidates judged (``bench/bench_offline_agents.py``) against those T_b.
3. ``summary``: a Markdown table per problem and per kind, and the headline numbers: share of problems with a
   passing candidate other than the bare reference, geomean of the best candidate over T_b, share above T_b,
   median SOL score, problems under 0.9x T_b, REWARD_HACK verdicts and crashes; per subgraph family
   (``agents/offline/subgraph``), the problems whose subgraph candidate held it, passed, won, and its speed.

    solforge problems generate --seed 7 --count 40 -o kernels_tmp/gen7
    python bench/generalization.py kernels_tmp/gen7 --device cuda --work kernels_tmp/gen7_run -o gen7.md
    python bench/generalization.py kernels_tmp/gen7 --steps summary --work kernels_tmp/gen7_run -o gen7.md

``--gpus N`` splits the problems round-robin into N shards, each a child run of this script on one GPU
(``CUDA_VISIBLE_DEVICES``) with its own work directory ``WORK/shard<i>``, all at once; the summary reads every
shard's records. A multi-GPU machine measures N problems at a time for the same device time.

``--batch N`` runs T_b and the agents N problems at a time, in an order that deals the kinds round-robin, so a
run stopped early covers every kind; with ``--deadline S`` no batch starts once the ones so far (at their mean
pace) would end past S seconds. Problems left for the deadline are listed as skipped, not as crashes, and a later
run with the same ``--work`` goes on with them.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from problem_args import problems_parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agents.offline.subgraph.families import FAMILIES  # noqa: E402
from agents.offline.subgraph.stand_ins import STOOD_IN  # noqa: E402
from sol_bench.problem import find_problems  # noqa: E402

FAMILY_NAMES = tuple(f.name for f in FAMILIES)
CAPTURE_NAMES = (*STOOD_IN, "expert_loop")  # what the capture itself replaces, named in the candidate's name too

REPO = Path(__file__).resolve().parents[1]
STEPS = ("tb", "agents", "summary")
FLOOR_BAR = 0.9  # a best candidate under this fraction of T_b counts as a regression


@dataclass(frozen=True)
class ProblemRow:
    name: str
    kind: str
    best: str | None
    passed: int
    tried: int
    vs_tb: float | None
    sol: float | None
    reward_hacks: int
    crashed: str | None
    skipped: bool = False
    told: str = ""  # what the candidates said they chose per signature (``told_summary``)
    others_passed: bool = False  # a candidate other than the bare reference got PASSED in every verdict it has

    @property
    def has_real_candidate(self) -> bool:
        """A candidate other than the bare reference passed, the best or not (on a CPU eager's own time can
        read fastest by noise while the tuned reference passed too)."""
        return self.others_passed or (self.best is not None and self.best != "ref_eager")


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def problem_kinds(roots: list[Path]) -> dict[str, str]:
    """Problem name -> its kind: the definition's ``kind:`` tags joined, else its op_type."""
    out = {}
    for root in roots:
        for d in sorted(p.parent for p in root.rglob("definition.json")):
            data = json.loads((d / "definition.json").read_text())
            kinds = sorted(t.split(":", 1)[1] for t in data.get("tags", []) if t.startswith("kind:"))
            out[data["name"]] = "+".join(kinds) or data.get("op_type") or "unknown"
    return out


def run_step(cmd: list[str], log: Path, timeout_s: float) -> str | None:
    """Run one step; None when it finished, else why not (the log keeps its output)."""
    print("+", " ".join(cmd), flush=True)
    start = time.monotonic()
    with log.open("a") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, cwd=REPO).returncode
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout_s:.0f} s"
        finally:
            print(f"  {Path(cmd[1]).name}: {time.monotonic() - start:.0f} s", flush=True)
    return None if rc == 0 else f"exit {rc}"


def rows(
    kinds: dict[str, str], records: list[dict], failure: str | None, skipped: set[str] = frozenset()
) -> list[ProblemRow]:
    by_name = {r["problem"]: r for r in records}
    out = []
    for name, kind in sorted(kinds.items()):
        r = by_name.get(name)
        if r is None and name in skipped:
            out.append(ProblemRow(name, kind, None, 0, 0, None, None, 0, None, skipped=True))
            continue
        if r is None:
            out.append(ProblemRow(name, kind, None, 0, 0, None, None, 0, failure or "not reached"))
            continue
        statuses = r.get("statuses", {})
        hacks = sum("REWARD_HACK" in s for s in statuses.values())
        others = any(c != "ref_eager" and got and all(x == "PASSED" for x in got) for c, got in statuses.items())
        out.append(ProblemRow(name, kind, r.get("best"), r.get("passed", 0), r.get("tried", 0), r.get("vs_tb"),
                              r.get("sol_score"), hacks, r.get("error"),
                              told=told_summary(r.get("told", {})), others_passed=others))  # fmt: skip
    return out


def told_summary(told: dict[str, list[str]]) -> str:
    """The candidates' own lines (``solforge tuned ...: keeps WAY; ...``, ``solforge subgraph ...: replaced ...``,
    ``solforge graph ...: not captured, ...``, ``solforge way OP ...: keeps WAY``, ``solforge into ...: family ops
    store ...``), counted: which way the tuned reference kept over the signatures, at how many the subgraph
    candidate replaced nothing, at how many a candidate's CUDA graph was not captured, at how many op shapes a
    family's own kernel beat the default, and at how many signatures family ops stored outputs themselves."""
    parts = []
    for name, lines in sorted(told.items()):
        kept = Counter(x.split(": keeps ", 1)[1].split(";", 1)[0] for x in lines
                       if x.startswith("solforge tuned") and ": keeps " in x)  # fmt: skip
        if kept:
            parts.append(f"{name} kept " + ", ".join(f"{way} x{n}" for way, n in kept.items()))
        replaced = [x.split(": replaced ", 1)[1] for x in lines if ": replaced " in x]
        if replaced:
            none = sum(r.startswith("nothing") for r in replaced)
            parts.append(f"{name} replaced nothing at {none} of {len(replaced)}" if none else
                         f"{name} replaced regions at all {len(replaced)}")  # fmt: skip
        ways = [x.split(": keeps ", 1)[1].split(";", 1)[0] for x in lines if x.startswith("solforge way")]
        if ways:
            mine = sum(w != "default" for w in ways)
            parts.append(f"{name} family kernels kept at {mine} of {len(ways)} op shapes")
        stored = sum(x.startswith("solforge into") for x in lines)
        if stored:
            parts.append(f"{name} family ops stored outputs at {stored}")
        eager = sum(": not captured, runs eagerly" in x for x in lines)
        if eager:
            parts.append(f"{name} ran eagerly (its CUDA graph not captured) at {eager}")
        # a way the tuned reference times, not what it runs unless that way is kept (the eager reference's graph,
        # say, where the reference syncs)
        ways_eager = Counter(x.split(": the ", 1)[1].split(" way not captured", 1)[0] for x in lines
                             if x.startswith("solforge graph") and " way not captured, runs eagerly" in x)  # fmt: skip
        for way, n in sorted(ways_eager.items()):
            parts.append(f"{name} could not capture its graph of {way} at {n}")
    return "; ".join(parts)


SUBGRAPH_PREFIX = "subgraph_"  # the subgraph candidate's name: subgraph_<family>_<family>...


def named_families(candidate: str, known: tuple[str, ...]) -> list[str]:
    """The families a subgraph candidate's name lists (``subgraph_rmsnorm_bwd_index_add`` -> rmsnorm_bwd,
    index_add): names hold underscores themselves, so the longest known name that starts the rest is taken each
    time; an unknown rest is one name."""
    rest, out = candidate.removeprefix(SUBGRAPH_PREFIX), []
    by_length = sorted(known, key=len, reverse=True)
    while rest:
        name = next((k for k in by_length if rest == k or rest.startswith(k + "_")), rest)
        out.append(name)
        rest = rest[len(name) + 1 :]
    return out


@dataclass(frozen=True)
class FamilyRow:
    """How the subgraph candidates holding one family did: problems where one was judged, passed, was the best,
    and the geomean over T_b of the passing ones."""

    family: str
    tried: int
    passed: int
    best: int
    vs_tb: float | None


def family_rows(records: list[dict], families: tuple[str, ...]) -> list[FamilyRow]:
    """Per family, from each record's per-candidate statuses and latencies: a subgraph candidate's vs T_b is the
    best candidate's times the ratio of their latencies (both judged on the same workloads against the same T_b)."""
    out = []
    for family in families:
        tried = passed = best = 0
        wins: list[float] = []
        for r in records:
            names = [n for n in r.get("statuses", {}) if n.startswith(SUBGRAPH_PREFIX)
                     and family in named_families(n, (*families, *CAPTURE_NAMES))]  # fmt: skip
            if not names:
                continue
            tried += 1
            ok = [n for n in names if r["statuses"][n] == ["PASSED"]]
            passed += bool(ok)
            best += r.get("best") in names
            ms, best_ms, vs_tb = r.get("tried_ms", {}), r.get("latencies_ms"), r.get("vs_tb")
            for n in ok[:1]:
                mine, theirs = ms.get(n), best_ms
                if mine and theirs and vs_tb and mine.keys() == theirs.keys():
                    wins.append(vs_tb * geomean([theirs[k] / mine[k] for k in mine]))
        out.append(FamilyRow(family, tried, passed, best, geomean(wins)))
    return out


def render_families(rows_: list[FamilyRow]) -> str:
    lines = ["", "| subgraph family | problems tried | passed | best candidate | geomean vs T_b where passed |",
             "|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r.family} | {r.tried} | {r.passed} | {r.best} | {fmt(r.vs_tb, suffix='x')} |" for r in rows_]
    return "\n".join(lines) + "\n"


def fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "–" if x is None else f"{x:{spec}}{suffix}"


def headline(rows_: list[ProblemRow]) -> dict[str, float | int | None]:
    rs = [r for r in rows_ if not r.skipped]
    tb = [r.vs_tb for r in rs if r.vs_tb]
    sols = [r.sol for r in rs if r.sol is not None]
    return {
        "problems": len(rs),
        "skipped": len(rows_) - len(rs),
        "real_candidate": sum(r.has_real_candidate for r in rs),
        "geomean_vs_tb": geomean(tb),
        "above_tb": sum(x > 1 for x in tb),
        "with_tb": len(tb),
        "under_floor": sum(x < FLOOR_BAR for x in tb),
        "median_sol": statistics.median(sols) if sols else None,
        "reward_hacks": sum(r.reward_hacks for r in rs),
        "crashed": sum(r.crashed is not None for r in rs),
    }


def render(rs: list[ProblemRow], title: str) -> str:
    h = headline(rs)
    n = max(h["problems"], 1)
    lines = [
        title, "",
        f"- problems: {h['problems']}; a passing candidate other than the bare reference: {h['real_candidate']} "
        f"({100 * h['real_candidate'] / n:.0f}%); crashed: {h['crashed']}; REWARD_HACK verdicts: {h['reward_hacks']}"
        + (f"; not started before the deadline: {h['skipped']}" if h["skipped"] else ""),
        f"- best candidate vs T_b: geomean {fmt(h['geomean_vs_tb'], suffix='x')}, above T_b {h['above_tb']}/"
        f"{h['with_tb']}, under {FLOOR_BAR}x T_b {h['under_floor']}; median SOL score {fmt(h['median_sol'])}",
        "", "| kind | problems | real candidate | geomean vs T_b | above T_b | median SOL |", "|---|---|---|---|---|---|",
    ]  # fmt: skip
    by_kind: dict[str, list[ProblemRow]] = defaultdict(list)
    for r in rs:
        by_kind[r.kind].append(r)
    for kind, group in sorted(by_kind.items()):
        k = headline(group)
        lines.append(f"| {kind} | {k['problems']} | {k['real_candidate']} | {fmt(k['geomean_vs_tb'], suffix='x')} "
                     f"| {k['above_tb']}/{k['with_tb']} | {fmt(k['median_sol'])} |")  # fmt: skip
    lines += ["", "| problem | kind | best candidate | passing/tried | vs T_b | median SOL | note |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rs:
        hacks = f"{r.reward_hacks} REWARD_HACK" if r.reward_hacks else ""
        note = r.crashed or ("skipped: deadline" if r.skipped else "; ".join(x for x in (hacks, r.told) if x))
        lines.append(f"| {r.name} | {r.kind} | {r.best or '– (none passed)'} | {r.passed}/{r.tried} "
                     f"| {fmt(r.vs_tb, suffix='x')} | {fmt(r.sol)} | {note} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def shards(roots: list[Path], n: int) -> list[list[Path]]:
    """The problem directories under ``roots``, dealt round-robin (sorted by name) into ``n`` non-empty shards."""
    dirs = sorted({d for root in roots for d in find_problems(root)}, key=lambda d: d.name)
    return [dirs[i::n] for i in range(n) if dirs[i::n]]


def run_shards(args, steps: list[str], log: Path) -> dict[str, str]:
    """Each shard's steps in a child run of this script on its own GPU, all at once; failures by shard."""
    procs = []
    for i, dirs in enumerate(shards(args.problems, args.gpus)):
        work = args.work / f"shard{i}"
        cmd = [sys.executable, __file__, *map(str, dirs), "--device", "cuda", "--work", str(work),
               "--steps", ",".join(s for s in steps if s != "summary"), "--workloads", str(args.workloads),
               "--max-candidates", str(args.max_candidates), "--problem-seconds", str(args.problem_seconds),
               "--timer", args.timer, "--tb-compiles", str(args.tb_compiles), "--step-seconds", str(args.step_seconds),
               "-o", str(work / "summary.md")]  # fmt: skip
        cmd += ["--tb-variants", args.tb_variants] if args.tb_variants else []
        cmd += ["--prebuild-jobs", str(args.prebuild_jobs)] if args.prebuild_jobs else []
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(i)}
        print("+", f"CUDA_VISIBLE_DEVICES={i}", " ".join(cmd), flush=True)
        with (work / "log.txt").open("a") as f:
            procs.append((i, subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=env)))
    failures = {}
    for i, proc in procs:
        try:
            rc = proc.wait(timeout=2 * args.step_seconds + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "killed after the steps' time"
        if rc != 0:
            failures[f"shard{i}"] = f"exit {rc}"
    with log.open("a") as f:
        f.write(f"shards: {len(procs)}, failed: {failures}\n")
    return failures


def read_records(work: Path) -> list[dict]:
    """The agents step's records of this work directory and of its shards."""
    files = [work / "agents.jsonl", *sorted(work.glob("shard*/agents.jsonl"))]
    return [json.loads(x) for f in files if f.exists() for x in f.read_text().splitlines() if x.strip()]


def run_steps(problems: list[Path], steps: list[str], args, work: Path) -> dict[str, str]:
    """T_b then the agents over ``problems``, each step a subprocess appending to ``work``'s records; why a step
    failed, by step."""
    tb, agents, log = work / "tb.jsonl", work / "agents.jsonl", work / "log.txt"
    py = sys.executable
    pick = ["--max-workloads", str(args.workloads), "--workload-pick", "spread"]
    failures = {}
    if "tb" in steps:
        cmd = [py, "bench/measure_tb.py", *map(str, problems), "--device", args.device, "--timer", args.timer,
               *pick, "--compiles", str(args.tb_compiles), "--resume", "-o", str(tb)]  # fmt: skip
        cmd += ["--variants", args.tb_variants] if args.tb_variants else []
        if why := run_step(cmd, log, args.step_seconds):
            failures["tb"] = why
    if "agents" in steps:
        cmd = [py, "bench/bench_offline_agents.py", *map(str, problems), "--device", args.device,
               "--timer", args.timer, *pick, "--max-candidates", str(args.max_candidates),
               "--problem-seconds", str(args.problem_seconds), "--json-out", str(agents), "--resume",
               "-o", str(work / "agents.md")]  # fmt: skip
        cmd += ["--baselines", str(tb)] if tb.exists() and tb.stat().st_size else []
        cmd += ["--prebuild-jobs", str(args.prebuild_jobs)] if args.prebuild_jobs else []
        if why := run_step(cmd, log, args.step_seconds):
            failures["agents"] = why
    return failures


def dealt_by_kind(roots: list[Path]) -> list[Path]:
    """The problem directories under ``roots``, one of each kind in turn (kinds and names sorted), so that any
    prefix of the list spreads over the kinds."""
    by_kind: dict[str, list[Path]] = defaultdict(list)
    for d in sorted({d for root in roots for d in find_problems(root)}, key=lambda d: d.name):
        by_kind[next(iter(problem_kinds([d]).values()), "unknown")].append(d)
    queues = [by_kind[k] for k in sorted(by_kind)]
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _recorded(work: Path, steps: list[str]) -> set[str]:
    """The problems every one of ``steps`` has a record of in ``work`` already."""
    names = []
    for step in steps:
        f = work / f"{step}.jsonl"
        lines = f.read_text().splitlines() if f.exists() else []
        names.append({json.loads(x)["problem"] for x in lines if x.strip()})
    return set.intersection(*names) if names else set()


def run_batches(args, steps: list[str]) -> tuple[dict[str, str], list[str]]:
    """The steps ``args.batch`` problems at a time; no batch starts once the batches so far, at their mean pace,
    would end past ``args.deadline`` seconds. Failures by batch and step, and the names of the problems skipped."""
    done = _recorded(args.work, steps)
    order = [d for d in dealt_by_kind(args.problems) if d.name not in done]  # resumed: no process for what is done
    batches = [order[i : i + args.batch] for i in range(0, len(order), args.batch)]
    start, failures, skipped = time.monotonic(), {}, []
    for i, batch in enumerate(batches):
        spent = time.monotonic() - start
        if args.deadline and i and spent + spent / i > args.deadline:
            skipped = [name for b in batches[i:] for name in problem_kinds(b)]
            print(f"deadline: {len(skipped)} problems left for a later run", flush=True)
            break
        print(f"batch {i + 1}/{len(batches)} at {spent:.0f} s: {', '.join(d.name for d in batch)}", flush=True)
        failures |= {f"batch {i + 1} {k}": v for k, v in run_steps(batch, steps, args, args.work).items()}
    return failures, skipped


def main() -> int:
    ap = problems_parser(__doc__)
    ap.add_argument("--work", type=Path, required=True, help="where each step's records and logs go")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    ap.add_argument("--workloads", type=int, default=3, help="workloads per problem, smallest to largest")
    ap.add_argument("--max-candidates", type=int, default=6, help="candidates judged per problem")
    ap.add_argument("--problem-seconds", type=float, default=60.0, help="no new candidate after this long on one")
    ap.add_argument("--timer", default="cupti", help="CUDA timer for T_b and the judge alike (cupti: the GPU's "
                    "work, as upstream times; events also counts host launch time past the pre-roll)")
    ap.add_argument("--tb-variants", help="T_b variants (sol_bench.baseline), comma-separated [all]")
    ap.add_argument("--tb-compiles", type=int, default=1, help="fresh compiles per torch.compile T_b variant")
    ap.add_argument("--step-seconds", type=float, default=3600.0, help="a step running longer is stopped")
    ap.add_argument("--gpus", type=int, default=1, help="shards run at once, one GPU each")
    ap.add_argument("--batch", type=int, default=0, help="T_b and agents this many problems at a time, kinds dealt "
                    "round-robin (0: all at once)")
    ap.add_argument("--deadline", type=float, default=0.0, help="with --batch: start no batch that would end past "
                    "this many seconds")
    ap.add_argument("--prebuild-jobs", type=int, default=0, help="the agents' C++ candidates built this many at once "
                    "before judging (GPU runs)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    steps = [s for s in args.steps.split(",") if s]
    if bad := set(steps) - set(STEPS):
        ap.error(f"unknown steps {sorted(bad)}; known: {', '.join(STEPS)}")
    if args.deadline and not args.batch:
        ap.error("--deadline needs --batch: the deadline is checked between batches")
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "log.txt"
    failures: dict[str, str] = {}
    if args.gpus > 1 and set(steps) & {"tb", "agents"}:
        failures |= run_shards(args, steps, log)
        steps = [s for s in steps if s == "summary"]
    if args.batch and set(steps) & {"tb", "agents"}:
        batch_failures, skipped = run_batches(args, [s for s in steps if s != "summary"])
        failures |= batch_failures
        (args.work / "skipped.json").write_text(json.dumps(skipped))
    elif set(steps) & {"tb", "agents"}:
        failures |= run_steps(args.problems, steps, args, args.work)
    records = read_records(args.work)
    skipped_file = args.work / "skipped.json"
    skipped = set(json.loads(skipped_file.read_text())) if skipped_file.exists() else set()
    rs = rows(problem_kinds(args.problems), records, failures.get("agents"), skipped)
    title = f"# Generality: {', '.join(map(str, args.problems))} on {args.device}, {args.workloads} workloads each"
    text = render(rs, title) + render_families(family_rows(records, FAMILY_NAMES))
    if failures:
        text += "\n" + "\n".join(f"- step {k}: {v} (see {log})" for k, v in failures.items()) + "\n"
    args.output.write_text(text)
    (args.work / "headline.json").write_text(json.dumps(headline(rs), indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
