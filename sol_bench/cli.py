"""The judge's command line, usable with nothing but torch and pydantic (``python -m sol_bench``).

``solforge eval`` and ``solforge problems validate`` are thin shells over ``run_eval`` and
``run_validate``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import IO

from .errors import InputError, JudgeError, SolBenchError
from .judge import JudgeConfig, evaluate
from .models import Status, Trace
from .problem import find_problems, load_problem, load_solution
from .timing import LAUNCH_PREROLL_US, PREROLL_KINDS, TIMERS
from .worker import BUFFER_MODES


def _write_atomic(path: Path, lines: list[str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.writelines(lines)
    os.replace(tmp, path)


def _row(t: Trace) -> str:
    e = t.evaluation
    perf = e.performance
    lat = f"{perf.latency_ms:10.4f}" if perf else " " * 10
    ref = f"{perf.reference_latency_ms:10.4f}" if perf else " " * 10
    spd = f"{perf.speedup_factor:7.2f}x" if perf else " " * 8
    sol = f"{e.t_sol_ms:10.5f}" if e.t_sol_ms else " " * 10
    return f"{t.workload.uuid[:24]:24} {e.status.value:20} {lat} {ref} {spd} {sol}  {e.reason or ''}"


def run_eval(
    problem_dir: Path,
    solution_path: Path,
    device: str = "cpu",
    as_json: bool = False,
    output: Path | None = None,
    timeout_s: float = 300.0,
    compile_timeout_s: float = 600.0,
    seed: int | None = None,
    iterations: int = 50,
    warmup: int = 10,
    staging_root: Path = Path("kernels_tmp"),
    data_root: Path | None = None,
    out: IO[str] = sys.stdout,
    workloads: list[str] | None = None,
    max_workloads: int | None = None,
    launch_preroll_us: float = LAUNCH_PREROLL_US,
    preroll_kind: str = "stream",
    timer: str = "events",
    buffers: str = "shared",
    min_iterations: int = 5,
    time_budget_s: float = 5.0,
) -> int:
    """Judge one solution on every workload.

    Exit code: 0 all PASSED, 1 otherwise; the caller maps InputError to 2 and JudgeError to 3.
    """
    problem = load_problem(problem_dir)
    if workloads:
        problem = problem.select(workloads)
    if max_workloads is not None:
        problem = problem.select(problem.smallest_workloads(max_workloads))
    solution = load_solution(solution_path)
    config = JudgeConfig(
        device=device, timeout_s=timeout_s, compile_timeout_s=compile_timeout_s, seed=seed,
        iterations=iterations, warmup=warmup, staging_root=staging_root, data_root=data_root,
        launch_preroll_us=launch_preroll_us, preroll_kind=preroll_kind, timer=timer, buffers=buffers,
        min_iterations=min_iterations, time_budget_s=time_budget_s,
    )  # fmt: skip
    if not as_json:
        print(f"{'workload':24} {'status':20} {'ms':>10} {'ref ms':>10} {'speedup':>8} {'T_SOL ms':>10}", file=out)

    def show(t: Trace) -> None:
        if as_json:
            out.write(t.model_dump_json() + "\n")
        else:
            out.write(_row(t) + "\n")
        out.flush()

    traces = evaluate(problem, solution, config, on_trace=show)
    if output is not None:
        _write_atomic(output, [t.model_dump_json() + "\n" for t in traces])
    return 0 if traces and all(t.evaluation.status is Status.PASSED for t in traces) else 1


def run_validate(dirs: list[Path], as_json: bool = False, out: IO[str] = sys.stdout) -> int:
    """Check problem directories. Exit code 0 when all are valid, 1 otherwise."""
    paths: list[Path] = []
    for d in dirs:
        found = find_problems(Path(d))
        paths.extend(found or [Path(d)])
    ok = True
    for p in paths:
        try:
            problem = load_problem(p)
            rec = {"path": str(p), "problem": problem.name, "valid": True, "error": None,
                   "workloads": len(problem.workloads)}  # fmt: skip
        except SolBenchError as e:
            ok = False
            rec = {"path": str(p), "problem": None, "valid": False, "error": str(e), "workloads": 0}
        if as_json:
            out.write(json.dumps(rec) + "\n")
        else:
            mark = "ok " if rec["valid"] else "BAD"
            out.write(f"{mark} {rec['path']}  {rec['problem'] or ''} {rec['error'] or ''}\n")
    return 0 if ok else 1


SERVE_DONE = "sol_bench_serve_done"


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sol_bench", description="The solforge judge.")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval", help="judge a solution on every workload of a problem")
    e.add_argument("problem_dir", type=Path)
    e.add_argument("--solution", type=Path, required=True)
    e.add_argument("--device", default="cpu")
    e.add_argument("--json", action="store_true")
    e.add_argument("-o", "--output", type=Path)
    e.add_argument("--timeout", type=float, default=300.0)
    e.add_argument("--compile-timeout", type=float, default=600.0)
    e.add_argument("--seed", type=int)
    e.add_argument("--iterations", type=_positive_int, default=50,
                   help="the most timed iterations per workload (default %(default)s)")
    e.add_argument("--min-iterations", type=_positive_int, default=5,
                   help="the fewest timed iterations, whatever the time budget (default %(default)s)")
    e.add_argument("--time-budget", type=_positive, default=5.0, dest="time_budget_s",
                   help="seconds of timed iterations per workload, for the candidate and again for the reference: "
                        "the count is what fits, estimated from the warm-up (default %(default)s)")
    e.add_argument("--warmup", type=int, default=10,
                   help="the most warm-up calls; fewer once they used a fifth of the time budget (default %(default)s)")
    e.add_argument("--staging-root", type=Path, default=Path("kernels_tmp"))
    e.add_argument("--data-root", type=Path)
    e.add_argument("--workload", action="append", help="judge only this workload uuid (repeatable)")
    e.add_argument("--max-workloads", type=int, help="judge only the N workloads that move the fewest bytes")
    e.add_argument("--launch-preroll-us", type=_non_negative, default=LAUNCH_PREROLL_US,
                   help="CUDA: host launch time left out of the timed window, in µs (default %(default)s; "
                        "it is also the most host work a candidate could hide there)")
    e.add_argument("--preroll-kind", choices=PREROLL_KINDS, default="stream",
                   help="CUDA: 'stream' spins one thread on the timed stream; 'device' holds every SM, so no "
                        "other stream's kernel runs beside the pre-roll (default %(default)s)")
    e.add_argument("--timer", choices=TIMERS, default="events",
                   help="CUDA: 'events' times between CUDA events after the pre-roll; 'cupti' takes upstream's "
                        "window, first GPU activity to last on any stream (default %(default)s)")
    e.add_argument("--buffers", choices=BUFFER_MODES, default="shared",
                   help="'private': the candidate runs on its own process's copies of the judge's buffers, "
                        "copied in and out outside the timed window, as the reference is timed; 'shared': on "
                        "the judge's buffers mapped into its process (default %(default)s)")
    v = sub.add_parser("validate", help="check problem directories")
    v.add_argument("dirs", type=Path, nargs="+")
    v.add_argument("--json", action="store_true")
    sub.add_parser("serve", help="judge eval requests from stdin, one JSON list of eval arguments per line")
    return p


def _dispatch(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    out = out or sys.stdout
    try:
        if args.cmd == "eval":
            return run_eval(
                args.problem_dir, args.solution, args.device, args.json, args.output, args.timeout,
                args.compile_timeout, args.seed, args.iterations, args.warmup, args.staging_root, args.data_root,
                out=out, workloads=args.workload, max_workloads=args.max_workloads,
                launch_preroll_us=args.launch_preroll_us, preroll_kind=args.preroll_kind, timer=args.timer,
                buffers=args.buffers, min_iterations=args.min_iterations, time_budget_s=args.time_budget_s,
            )  # fmt: skip
        return run_validate(args.dirs, args.json, out=out)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except JudgeError as err:
        print(f"judge error (not the candidate's fault): {err}", file=sys.stderr)
        return 3


def run_serve(parser: argparse.ArgumentParser, requests: IO[str] = sys.stdin, out: IO[str] = sys.stdout) -> int:
    """One judge process for many candidates: saves its start (imports, CUDA context) per candidate.

    Each request line is a JSON list of ``eval`` arguments; its traces are written exactly as ``eval --json``
    writes them, then one line ``{"sol_bench_serve_done": true, "exit": N}`` with the exit code ``eval``
    would have returned. Candidates still run in their own sandboxed worker processes, one per candidate.
    After a judge error (exit 3) the server stops: its own state is no longer trusted.
    """
    for line in requests:
        if not line.strip():
            continue
        try:
            argv = json.loads(line)
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise ValueError("a request is a JSON list of strings")
            if {"-h", "--help"} & set(argv):
                raise ValueError("help would write to the trace channel")
            args = parser.parse_args(["eval", *argv])
        except (ValueError, SystemExit) as err:  # argparse exits on bad arguments
            print(f"error: bad request: {err}", file=sys.stderr)
            rc = 2
        else:
            rc = _dispatch(args, out)
        out.write(json.dumps({SERVE_DONE: True, "exit": rc}) + "\n")
        out.flush()
        if rc == 3:
            return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        return run_serve(parser)
    return _dispatch(args)
