"""The judge on a GPU: honest solutions in every language pass, GPU-only cheats are caught.

Runs ``python -m sol_bench eval PROBLEM --solution S --device cuda --json`` for every solution of the GPU
corpus (``tests/judge_corpus/gpu/``), the fixture solutions (``tests/fixtures/solutions/``), the non-PyTorch
honest corpus entries and the generic cheats that matter on a GPU too, then compares each workload's
status with the one the corpus expects. Prints a Markdown table and writes it to ``--out``. Exit code 0 iff
every expectation held (a skipped entry, e.g. CuTe DSL where cutlass-dsl is missing, does not count).

Needs only torch, pydantic and this repository. On a machine without a GPU, ``--device cpu --dry-run``
lists what would run and checks that every solution and problem loads.

Example (on an H200, about 5 minutes cold, less with a warm build cache):
    python bench/judge_gpu_suite.py --out docs/judge_gpu_suite.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from judge_corpus import corpus  # noqa: E402
from sol_bench.models import Solution, Status, Trace  # noqa: E402
from sol_bench.problem import load_problem, load_solution  # noqa: E402

FIXTURE_SOLUTIONS = REPO / "tests" / "fixtures" / "solutions"
# Corpus entries outside gpu/ that belong in a GPU run: other languages, and cheats that mean the same on a GPU.
EXTRA_ENTRIES = (
    ("honest", "swiglu_cuda"),
    ("honest", "swiglu_cuda_broken"),
    ("honest", "softmax_triton"),
    ("cheats", "mutate_inputs"),
    ("cheats", "cache_by_address"),
    ("cheats", "thread_per_call"),
    ("cheats", "thread_after_return"),
)
# Language -> Python module the judge's worker needs for it; missing module: the entry is skipped.
NEEDS_MODULE = {"triton": "triton", "cute_dsl": "cutlass"}
MODULE_LABEL = {"triton": "triton", "cutlass": "cutlass-dsl"}
# With the command line's 3 correctness rounds the first buffer set comes back in round 3, so a cache keyed by
# address already fails there (INCORRECT_NUMERICAL) instead of in the timed runs (REWARD_HACK): both catch it.
EXTRA_ACCEPT = {"cheats/cache_by_address": ["INCORRECT_NUMERICAL"]}


@dataclass
class Case:
    label: str  # group/name
    problem: str
    solution_json: Path
    expect: dict[str, str]  # workload uuid or "*" -> status
    accept: list[str] = field(default_factory=list)  # other statuses that also count as caught
    languages: list[str] = field(default_factory=list)
    # A cheat that PASSES was not rewarded only if it was timed honestly: {"at_least_ms": x} and/or
    # {"at_least_fraction_of": "<label of an honest case on the same problem>", "fraction": f}.
    if_passed: dict = field(default_factory=dict)

    def expected(self, uuid: str) -> str:
        return self.expect.get(uuid, self.expect.get("*", "?"))

    def holds(self, uuid: str, got: str) -> bool:
        return got == self.expected(uuid) or got in self.accept


@dataclass
class Result:
    case: Case
    statuses: dict[str, str] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None  # the run itself went wrong (no traces, bad exit code, junk on stdout)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        if self.error or not self.statuses:
            return False
        return all(self.case.holds(u, s) for u, s in self.statuses.items())


def _expect_map(e: corpus.Entry, kind: str) -> dict[str, str] | None:
    raw = e.expect.get(kind)
    if raw is None:
        return None
    return {"*": raw} if isinstance(raw, str) else dict(raw)


def _accept(e: corpus.Entry, kind: str) -> list[str]:
    meta = json.loads((e.path / "meta.json").read_text())
    return list(meta.get("accept", {}).get(kind, []))


def _if_passed(e: corpus.Entry, kind: str) -> dict:
    meta = json.loads((e.path / "meta.json").read_text())
    return dict(meta.get("if_passed", {}).get(kind, {}))


def select(cases: list[Case], only: list[str]) -> list[Case]:
    """The cases whose labels contain any of ``only``, plus the honest cases their PASSED verdicts are
    compared with (a conditional cheat cannot be judged alone), in the suite's order."""
    chosen = {c.label for c in cases if any(o in c.label for o in only)}
    chosen |= {c.if_passed["at_least_fraction_of"] for c in cases
               if c.label in chosen and c.if_passed.get("at_least_fraction_of")}  # fmt: skip
    return [c for c in cases if c.label in chosen]


def check_honest_timing(results: list[Result]) -> None:
    """A cheat that PASSED must show an honest latency; otherwise its result becomes an error."""
    by_label = {r.case.label: r for r in results}
    for r in results:
        rule = r.case.if_passed
        if not rule or r.skipped or r.error:
            continue
        for uuid, status in r.statuses.items():
            if status != Status.PASSED.value:
                continue
            got = r.latency_ms.get(uuid)
            floor = float(rule.get("at_least_ms", 0.0))
            ref_label = rule.get("at_least_fraction_of")
            if ref_label:
                ref = by_label.get(ref_label)
                ref_ms = ref.latency_ms.get(uuid) if ref else None
                if ref_ms is None:
                    r.error = f"{uuid}: PASSED, but the honest case {ref_label} did not run to compare with (add it)"
                    break
                floor = max(floor, float(rule.get("fraction", 0.5)) * ref_ms)
            if got is None or got < floor:
                r.error = f"{uuid}: PASSED with {got} ms, under the honest floor {floor:.4f} ms: the cheat was rewarded"
                break


def build_cases(work: Path, kind: str, workloads: int, all_corpus: bool) -> list[Case]:
    """Materialize problems under ``work/problems`` and write every solution JSON under ``work/solutions``."""
    chosen: list[corpus.Entry] = list(corpus.entries("gpu"))
    names = set(EXTRA_ENTRIES)
    if all_corpus:
        names |= {(e.group, e.name) for g in ("honest", "cheats") for e in corpus.entries(g) if kind in e.expect}
    chosen += [corpus.entry(g, n) for g, n in sorted(names)]
    problems: dict[str, Path] = {}

    def problem_dir(name: str) -> Path:
        if name not in problems:
            problems[name] = corpus.materialize(name, work / "problems", workloads)
        return problems[name]

    cases = []
    for e in chosen:
        expect = _expect_map(e, kind)
        if expect is None:
            continue
        pdir = problem_dir(e.problem)
        params = {"PROBLEM_DIR": pdir, "SOL_BENCH_DIR": REPO / "sol_bench", "PORT": 9, "TOKEN": "x"}
        path = e.write_solution_json(work / "solutions" / e.group / f"{e.name}.json", **params)
        label = f"{e.group}/{e.name}"
        accept = _accept(e, kind) + EXTRA_ACCEPT.get(label, [])
        cases.append(Case(label, e.problem, path, expect, accept, list(e.spec["languages"]), _if_passed(e, kind)))
    for path in sorted(FIXTURE_SOLUTIONS.glob("*.json")):
        sol = load_solution(path)
        problem_dir(sol.definition)
        cases.append(Case(f"fixtures/{path.stem}", sol.definition, path, {"*": Status.PASSED.value}, [],
                          [lang.value for lang in sol.spec.languages]))  # fmt: skip
    for c in cases:
        c.problem_dir = problems[c.problem]  # type: ignore[attr-defined]
    return cases


def missing_module(case: Case) -> str | None:
    for lang in case.languages:
        mod = NEEDS_MODULE.get(lang)
        if mod and importlib.util.find_spec(mod) is None:
            return f"skipped: {MODULE_LABEL[mod]} not installed"
    return None


def command(case: Case, device: str, iterations: int, warmup: int, staging: Path, preroll_kind: str = "stream",
            timer: str = "events") -> list[str]:
    return [
        sys.executable, "-m", "sol_bench", "eval", str(case.problem_dir), "--solution", str(case.solution_json),  # type: ignore[attr-defined]
        "--device", device, "--json", "--iterations", str(iterations), "--warmup", str(warmup),
        "--staging-root", str(staging), "--preroll-kind", preroll_kind, "--timer", timer,
    ]  # fmt: skip


def run_case(case: Case, argv: list[str], timeout_s: float) -> Result:
    res = Result(case)
    res.skipped = missing_module(case)
    if res.skipped:
        return res
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired:
        res.error = f"suite timeout after {timeout_s:.0f} s"
        res.seconds = time.monotonic() - t0
        return res
    res.seconds = time.monotonic() - t0
    traces: list[Trace] = []
    for line in p.stdout.splitlines():
        try:
            traces.append(Trace.model_validate_json(line))
        except ValueError:
            res.error = f"stdout held a line that is not a trace: {line[:120]!r}"
    for t in traces:
        ev = t.evaluation
        res.statuses[t.workload.uuid] = ev.status.value
        res.reasons[t.workload.uuid] = (ev.reason or "").replace("|", "/")[:140]
        if ev.performance is not None:
            res.latency_ms[t.workload.uuid] = ev.performance.latency_ms
    all_passed = bool(traces) and all(t.evaluation.status is Status.PASSED for t in traces)
    if p.returncode not in (0, 1) or (p.returncode == 0) != all_passed:
        tail = p.stderr.strip().splitlines()[-1:] or [""]
        res.error = (res.error or "") + f" exit code {p.returncode}: {tail[0][:200]}"
    return res


def table(results: list[Result], device: str) -> str:
    rows = [
        f"Judge GPU suite on `{device}`: {sum(r.ok for r in results)}/{len(results)} expectations held "
        f"({sum(1 for r in results if r.skipped)} skipped).",
        "",
        "| solution | problem | expected | got (per workload) | ok | reason | median latency ms | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.case
        expected = ", ".join(f"{k}:{v}" for k, v in c.expect.items())
        if c.accept:
            expected += " (or " + "/".join(c.accept) + ")"
        if r.skipped:
            rows.append(f"| {c.label} | {c.problem} | {expected} | {r.skipped} | skip | | | |")
            continue
        got = ", ".join(f"{u}:{s}" for u, s in r.statuses.items()) or "(no traces)"
        reason = "; ".join(sorted({x for x in r.reasons.values() if x}))
        if r.error:
            reason = f"RUN ERROR: {r.error}; {reason}"
        lat = ", ".join(f"{u}:{v:.4f}" for u, v in r.latency_ms.items())
        rows.append(f"| {c.label} | {c.problem} | {expected} | {got} | {'yes' if r.ok else 'NO'} | {reason} | {lat} | {r.seconds:.0f} |")
    return "\n".join(rows) + "\n"


def dry_run(cases: list[Case], device: str, iterations: int, warmup: int, staging: Path, preroll_kind: str = "stream",
            timer: str = "events") -> int:
    bad = 0
    for c in cases:
        try:
            sol = load_solution(c.solution_json)
            assert isinstance(sol, Solution)
            prob = load_problem(c.problem_dir)  # type: ignore[attr-defined]
            if sol.definition != prob.name:
                raise ValueError(f"solution is for {sol.definition!r}, problem is {prob.name!r}")
            for s in [*c.expect.values(), *c.accept]:
                Status(s)
            for src in sol.sources:
                if src.path.endswith(".py"):
                    compile(src.content, f"{c.label}/{src.path}", "exec")
            note = missing_module(c) or "would run"
            print(f"ok   {c.label:40} {c.problem:16} {len(prob.workloads)} workloads  {note}")
        except Exception as e:  # noqa: BLE001 - report every broken entry, then fail
            bad += 1
            print(f"BAD  {c.label:40} {type(e).__name__}: {e}")
        print("     " + " ".join(command(c, device, iterations, warmup, staging, preroll_kind, timer)))
    print(f"{len(cases)} cases, {bad} broken")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--workloads", type=int, default=2, help="first N workloads of each problem")
    p.add_argument("--staging-root", type=Path, default=Path("/tmp/suite"))
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per solution")
    p.add_argument("--jobs", type=int, default=1, help="solutions judged at once (more skews GPU timings)")
    p.add_argument("--all-corpus", action="store_true", help="also every honest/cheat entry with a CUDA verdict")
    p.add_argument("--only", action="append", help="run only labels containing this text (repeatable), with the honest cases they are compared with")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--out", type=Path, help="write the Markdown table here")
    p.add_argument("--preroll-kind", choices=("stream", "device"), default="stream", help="the judge's launch pre-roll")
    p.add_argument("--timer", choices=("events", "cupti"), default="events", help="the judge's CUDA timer")
    args = p.parse_args(argv)
    kind = "cuda" if args.device.startswith("cuda") else "cpu"

    work = Path(tempfile.mkdtemp(prefix="judge-gpu-suite-"))
    try:
        cases = build_cases(work, "cuda", args.workloads, args.all_corpus)
        if args.only:
            cases = select(cases, args.only)
        if args.dry_run:
            code = dry_run(cases, args.device, args.iterations, args.warmup, args.staging_root, args.preroll_kind, args.timer)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text("".join(f"- {c.label} ({c.problem})\n" for c in cases))
            return code
        if kind != "cuda":
            print("the suite's expectations are for CUDA; use --dry-run on a CPU", file=sys.stderr)
            return 2
        args.staging_root.mkdir(parents=True, exist_ok=True)
        argvs = [command(c, args.device, args.iterations, args.warmup, args.staging_root, args.preroll_kind, args.timer)
                 for c in cases]
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_case, c, a, args.timeout) for c, a in zip(cases, argvs)]
            results = []
            for f in futures:
                r = f.result()
                results.append(r)
                mark = "skip" if r.skipped else ("ok" if r.ok else "FAIL")
                print(f"{mark:4} {r.case.label:40} {r.seconds:6.1f} s  {r.statuses or r.skipped or r.error}", flush=True)
        check_honest_timing(results)
        for r in results:
            if r.error and r.case.if_passed:
                print(f"FAIL {r.case.label:40} {r.error}", flush=True)
        text = table(results, args.device) + f"\nTotal wall time: {time.monotonic() - t0:.0f} s.\n"
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        return 0 if all(r.ok for r in results) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
