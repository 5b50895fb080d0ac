"""`bench/family_ab.py`: what the kernel families found inside problems win, judged: per problem, the subgraph
candidate (families replaced, the rest by Inductor, one graph), the tuned reference without the families' way
and with it (what the agent plans first), each through ``python -m sol_bench eval`` in its own process on the
same workloads spread from smallest to largest; a table of T_k per workload and each against the plain tuned
reference (which reads T_b within a few percent). A problem where no family is found is listed as such; a
candidate that fails or runs out of time is a row with its reason, and the rest go on.

    python bench/family_ab.py kernels_tmp/gen4242 --device cuda --timer cupti -o /tmp/family_ab.md
    python bench/family_ab.py tests/fixtures/problems --device cpu --candidates subgraph --workloads 1 (a check)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from agents.offline.compiled import tuned_solution  # noqa: E402
from agents.offline.subgraph import solution as subgraph_solution  # noqa: E402
from report_text import emit_report  # noqa: E402
from sol_bench.problem import Problem, find_problems, load_problem  # noqa: E402

CANDIDATES = ("subgraph", "tuned", "tuned_families")
BASE = "tuned"


@dataclass
class Judged:
    candidate: str
    ms: dict[str, float] = field(default_factory=dict)  # workload uuid -> T_k of a passing workload
    statuses: dict[str, str] = field(default_factory=dict)
    why: str = ""  # the candidate did not run to the end: why


@dataclass
class Row:
    problem: str
    families: str
    workloads: list[str]
    judged: list[Judged]


def solutions(problem: Problem, found: subgraph_solution.Found, gpu: bool, names: list[str]) -> dict:
    made = {}
    for name in names:
        if name == "subgraph":
            made[name] = subgraph_solution.solution(problem, found)
        elif name == "tuned":
            made[name] = tuned_solution(problem, gpu)
        elif name == "tuned_families":
            made[name] = tuned_solution(problem, gpu, subgraph_solution.families_way(found))
    return made


def judge(problem_dir: Path, solution, workloads: list[str], args, work: Path, name: str) -> Judged:
    sol_path, out = work / f"{name}.json", work / f"{name}.jsonl"
    sol_path.write_text(solution.model_dump_json())
    cmd = [sys.executable, "-m", "sol_bench", "eval", str(problem_dir), "--solution", str(sol_path), "--device",
           args.device, "--timer", args.timer, "--staging-root", str(args.staging_root), "-o", str(out)]  # fmt: skip
    for u in workloads:
        cmd += ["--workload", u]
    got = Judged(name)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds, cwd=REPO)
    except subprocess.TimeoutExpired:
        got.why = f"over {args.seconds:.0f} s"
        return got
    (work / f"{name}.log").write_text(res.stdout + res.stderr)
    for line in out.read_text().splitlines() if out.exists() else []:
        trace = json.loads(line)
        ev = trace.get("evaluation") or {}
        uuid, status = trace.get("workload", {}).get("uuid", ""), ev.get("status", "?")
        got.statuses[uuid] = status
        if status == "PASSED" and (ms := (ev.get("performance") or {}).get("latency_ms")) is not None:
            got.ms[uuid] = float(ms)
    if not got.statuses:
        got.why = f"exit {res.returncode}: {(res.stderr.strip().splitlines() or ['no output'])[-1][:160]}"
    return got


def survey(problem_dir: Path, args, names: list[str]) -> Row:
    problem = load_problem(problem_dir)
    picked = problem.pick_workloads(args.workloads, "spread")
    found = subgraph_solution.find(problem)
    if not found.replaced:
        return Row(problem.name, f"none ({found.why})", picked, [])
    families = "+".join(found.families)
    try:
        made = solutions(problem, found, args.device.startswith("cuda"), names)
    except Exception as e:  # noqa: BLE001 - a problem whose candidates do not render is reported, the rest go on
        return Row(problem.name, f"{families} (not rendered: {type(e).__name__}: {e})", picked, [])
    with tempfile.TemporaryDirectory(prefix="family_ab_") as tmp:
        judged = [judge(problem_dir, sol, picked, args, Path(tmp), name) for name, sol in made.items()]
    return Row(problem.name, families, picked, judged)


def render(rows: list[Row], device: str, timer: str) -> list[str]:
    lines = [f"Families judged inside problems ({device}, {timer} timer): T_k ms per workload, smallest to "
             f"largest by bytes, and against the tuned reference without the families' way", "",
             "| problem | families | candidate | T_k ms | vs tuned |", "|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        if not row.judged:
            lines.append(f"| {row.problem} | {row.families} | - | - | - |")
            continue
        base = next((j for j in row.judged if j.candidate == BASE), None)
        for j in row.judged:
            if j.why:
                lines.append(f"| {row.problem} | {row.families} | {j.candidate} | {j.why} | - |")
                continue
            cells, ratios = [], []
            for u in row.workloads:
                ms = j.ms.get(u)
                cells.append(f"{ms:.4f}" if ms is not None else j.statuses.get(u, "not judged"))
                b = base.ms.get(u) if base is not None else None
                ratios.append(f"{b / ms:.2f}x" if ms and b else "-")
            lines.append(f"| {row.problem} | {row.families} | {j.candidate} | {', '.join(cells)} | {', '.join(ratios)} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", type=Path, help="problem directories or folders holding them")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", default="cupti")
    ap.add_argument("--workloads", type=int, default=3, help="workloads per problem, spread smallest to largest")
    ap.add_argument("--candidates", default=",".join(CANDIDATES), help=f"comma-separated of {', '.join(CANDIDATES)}")
    ap.add_argument("--seconds", type=float, default=300.0, help="one candidate's judging time box")
    ap.add_argument("--deadline", type=float, default=0.0, help="start no problem after this many seconds")
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("--json-out", type=Path, help="also write the rows as JSON lines")
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    names = [n for n in args.candidates.split(",") if n]
    if unknown := sorted(set(names) - set(CANDIDATES)):
        ap.error(f"unknown candidates {unknown}: choose from {', '.join(CANDIDATES)}")
    dirs = sorted({d for root in args.problems for d in find_problems(root)}, key=lambda d: d.name)
    start, rows = time.monotonic(), []
    for i, d in enumerate(dirs):
        if args.deadline and time.monotonic() - start > args.deadline:
            print(f"deadline: {len(dirs) - i} problems not judged", flush=True)
            break
        print(f"[{i + 1}/{len(dirs)}] {d.name}", flush=True)
        rows.append(survey(d, args, names))
        if args.json_out:
            with args.json_out.open("a") as f:
                f.write(json.dumps({"problem": rows[-1].problem, "families": rows[-1].families,
                                    "workloads": rows[-1].workloads,
                                    "judged": [j.__dict__ for j in rows[-1].judged]}) + "\n")  # fmt: skip
    emit_report(render(rows, args.device, args.timer), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
