"""Calls the judge in its own process: ``<python> -m sol_bench eval PROBLEM --solution FILE --device D --json``,
or sends the same arguments to a Dask worker's long-lived ``sol_bench serve`` process (``judge_server``).

The process boundary is part of the judge's security, so the pipeline never imports the judge to run a
candidate. The judge prints one Trace JSON per line (exit 0: all passed, 1: some failed, 2: bad input, 3: the
judge's own error).
Should the judge process itself die or overrun, every workload it did not report gets a trace saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from sol_bench.models import Environment, Evaluation, Solution, Status, Trace
from sol_bench.problem import Problem

from .judge_server import JudgeServers, ServedRun, ServerOverran, judge_python, pinned_env


class JudgeInputError(Exception):
    """The judge refused its input (exit 2): a broken problem or solution file, not a verdict."""


class JudgeInternalError(Exception):
    """The judge itself failed (exit 3): its environment, not the candidate. Retried once, then fatal."""


@dataclass(frozen=True)
class JudgeOptions:
    """How to call the judge. ``python`` defaults to ``$SOLFORGE_JUDGE_PYTHON``, else this interpreter; in a
    campaign it must also run ``-m sol_bench serve`` unless ``SOLFORGE_JUDGE_SERVER=0``."""

    device: str = "cpu"
    timeout_s: float = 60.0  # per workload, enforced by the judge
    compile_timeout_s: float = 300.0
    python: str = field(default_factory=judge_python)
    iterations: int | None = None  # timed iterations per workload (the judge's default when None)
    staging_root: str | None = None  # where the judge builds; a shared one lets it reuse C++ builds
    extra_args: tuple[str, ...] = ()
    worker_devices: dict[str, str] = field(default_factory=dict)  # in-process worker name -> CUDA_VISIBLE_DEVICES
    max_workloads: int | None = None  # judge only this many workloads per problem (the smallest by bytes)
    max_workload_bytes: int | None = None  # ... and only those moving at most this many bytes

    @classmethod
    def cpu_limits(cls, device: str) -> dict[str, int | None]:
        """Default workload limits: on a CPU the two smallest workloads of at most 64 MiB; none on a GPU."""
        return {"max_workloads": 2, "max_workload_bytes": 64 << 20} if device == "cpu" else {}

    def judge_env(self) -> dict[str, str]:
        """This process's env, pinned to the device of the Dask worker running the judge (if known)."""
        if not self.worker_devices:
            return os.environ.copy()
        from distributed import get_worker

        try:
            name = get_worker().name
        except ValueError:  # not inside a Dask worker
            name = None
        return pinned_env(self.worker_devices, name)

    def wall_limit_s(self, workloads: int) -> float:
        """A hard stop for the whole judge process, well past what the judge allows itself."""
        return self.compile_timeout_s + 3 * self.timeout_s * max(1, workloads) + 60.0


@dataclass(frozen=True)
class JudgeRun:
    traces: tuple[Trace, ...]
    returncode: int
    wall_s: float
    stderr_tail: str = ""


def restrict(problem: Problem, opts: JudgeOptions) -> Problem | None:
    """The workloads ``opts`` lets us judge (smallest first), or None when none is small enough."""
    if opts.max_workloads is None and opts.max_workload_bytes is None:
        return problem
    ranked = problem.smallest_workloads(len(problem.workloads))
    if opts.max_workload_bytes is not None:
        by_id = {w.uuid: w for w in problem.workloads}
        ranked = [u for u in ranked if problem.workload_bytes(by_id[u]) <= opts.max_workload_bytes]
    if opts.max_workloads is not None:
        ranked = ranked[: opts.max_workloads]
    return problem.select(ranked) if ranked else None


def judge_argv(problem_dir: Path, solution_file: Path, opts: JudgeOptions, workloads: list[str] | None = None) -> list[str]:
    return [opts.python, "-m", "sol_bench", "eval", *eval_args(problem_dir, solution_file, opts, workloads)]


def eval_args(problem_dir: Path, solution_file: Path, opts: JudgeOptions, workloads: list[str] | None = None) -> list[str]:
    """The arguments of ``sol_bench eval`` (also what a judge server request carries)."""
    return [
        str(problem_dir), "--solution", str(solution_file), "--device", opts.device, "--json",
        "--timeout", f"{opts.timeout_s:g}", "--compile-timeout", f"{opts.compile_timeout_s:g}",
        *(["--staging-root", opts.staging_root] if opts.staging_root else []),
        *(["--iterations", str(opts.iterations), "--warmup", str(min(10, opts.iterations))] if opts.iterations else []),
        *[arg for uuid in workloads or [] for arg in ("--workload", uuid)],
        *opts.extra_args,
    ]


def parse_traces(stdout: str) -> list[Trace]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out.append(Trace.model_validate_json(line))
        except ValidationError:
            continue  # the judge owns stdout; anything that is not a trace is not a verdict
    return out


def _missing(problem: Problem, solution: Solution, seen: set[str], status: Status, reason: str, device: str) -> list[Trace]:
    return [
        Trace(
            definition=problem.name,
            solution=solution.name,
            workload=w,
            evaluation=Evaluation(
                status=status, reason=reason, log=reason, environment=Environment(hardware=device), device=device
            ),
        )
        for w in problem.workloads
        if w.uuid not in seen
    ]


def _one_shot(argv: list[str], opts: JudgeOptions, cwd: str, deadline_s: float) -> ServedRun:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=deadline_s, cwd=cwd, env=opts.judge_env())
    except subprocess.TimeoutExpired as e:
        raise ServerOverran(e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")) from None
    return ServedRun(proc.returncode, proc.stdout, proc.stderr[-2000:])


def run_judge(problem: Problem, solution: Solution, opts: JudgeOptions, servers: JudgeServers | None = None) -> JudgeRun:
    """Judge ``solution`` on every workload of ``problem`` that ``opts`` allows; always one trace each.

    With ``servers`` (a Dask worker's), the request goes to that worker's long-lived judge process; else, or
    while it is busy, a judge process is started for this candidate alone.
    """
    full = problem
    problem = restrict(problem, opts) or full.select(full.smallest_workloads(1))
    with tempfile.TemporaryDirectory(prefix="solforge-judge-") as tmp:
        sol_file = Path(tmp) / "solution.json"
        sol_file.write_text(solution.model_dump_json())
        only = [w.uuid for w in problem.workloads] if problem is not full else None
        args = eval_args(Path(problem.path).resolve(), sol_file, opts, only)
        deadline = opts.wall_limit_s(len(problem.workloads))
        t0 = time.monotonic()
        try:
            served = servers.run(opts.python, opts.judge_env(), args, deadline) if servers is not None else None
            if served is None:
                served = _one_shot([opts.python, "-m", "sol_bench", "eval", *args], opts, tmp, deadline)
        except ServerOverran as e:
            wall = time.monotonic() - t0
            traces = [t for t in parse_traces(e.stdout) if t.definition == problem.name]
            seen = {t.workload.uuid for t in traces}
            reason = f"judge process overran {wall:.0f} s and was killed"
            traces += _missing(problem, solution, seen, Status.TIMEOUT, reason, opts.device)
            return JudgeRun(tuple(traces), returncode=-9, wall_s=wall)
        wall = time.monotonic() - t0
    tail = served.stderr_tail
    if served.returncode == 2:
        raise JudgeInputError(f"judge refused the input (exit 2): {tail.strip()[-500:]}")
    if served.returncode == 3:
        raise JudgeInternalError(f"judge error (exit 3): {tail.strip()[-500:]}")
    known = {w.uuid for w in problem.workloads}
    traces = [t for t in parse_traces(served.stdout) if t.workload.uuid in known]
    seen = {t.workload.uuid for t in traces}
    if len(seen) < len(known):
        reason = f"judge process exited with code {served.returncode} without a verdict: {tail.strip()[-300:]}"
        traces += _missing(problem, solution, seen, Status.RUNTIME_ERROR, reason, opts.device)
    return JudgeRun(tuple(traces), returncode=served.returncode, wall_s=wall, stderr_tail=tail)
