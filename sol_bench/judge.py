"""Judge one candidate on every workload of a problem: one Trace per workload, always.

The judge's process holds the inputs, the reference outputs and the verdicts. Candidate code runs in a
separate, sandboxed process (``sol_bench.worker``) that receives input and output buffers shared with the
judge's memory (never the reference outputs) and answers with JSON. Per workload:

1. correctness rounds (``buffers.correctness_rounds``): fresh inputs, outputs poisoned with NaN, reference
   computed on a private copy, inputs checked unchanged after the call;
2. warm-up and timed iterations (``timed_phase``): fresh input content every iteration, a random sample
   verified too (a wrong one is replayed untimed, ``recheck``); threads/processes of the candidate watched;
   stream leaks, pinned L2, clock disagreements and times under the speed-of-light bound become REWARD_HACK.
   The eager reference is timed by the same code, in a worker process of its own (``subject``), its timed
   iterations alternating with the candidate's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from . import sandbox
from .affinity import gpu_local_cpus
from .buffers import Subject, WorkloadBuffers, correctness_rounds
from .build import plan_build, run_build
from .errors import (
    CandidateFailure,
    CandidateTimeout,
    CompileFailure,
    ReferenceFailure,
    RewardHack,
    SolutionError,
    WrongNumbers,
)
from .inputs import InputContext, check_blobs, fresh_seed, sub_seed
from .models import Correctness, Environment, Evaluation, Language, Performance, Solution, Status, Trace, Workload
from .plausibility import below_sol_on_host_clock, clock_disagreement, host_time_outside_window, sol_floor
from .problem import Problem
from .reference import Reference, load_reference
from .runner import OUTPUT_MARK, Worker, candidate_env, handshake, spawn_worker
from .shared import SharedArena
from .staging import Staged, check_shadowing, stage
from .subject import reference_solution
from .timed_phase import TimedPhase, TimedRun
from .timing import LAUNCH_PREROLL_US, PREROLL_KINDS, TIMERS, TimingPlan, TimingStats, timing_method
from .worker import BUFFER_MODES

__all__ = ["JudgeConfig", "evaluate", "below_sol_on_host_clock", "clock_disagreement", "environment"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeConfig:
    device: str = "cpu"
    timeout_s: float = 300.0  # per workload, candidate time in total
    compile_timeout_s: float = 600.0
    seed: int | None = None
    correctness_rounds: int = 3
    warmup: int = 10  # the most warm-up calls (fewer once they use a fifth of time_budget_s)
    iterations: int = 50  # the most timed iterations
    min_iterations: int = 5  # the fewest, whatever the budget (never more than ``iterations``)
    time_budget_s: float = 5.0  # timed iterations per subject and workload fit this (timing.TimingPlan)
    check_every: int = 5  # about one timed iteration in this many has its outputs verified
    data_root: Path | None = None
    staging_root: Path = Path("kernels_tmp")
    hardware: str = "auto"
    sol_margin: float = 0.95  # a median latency under sol_margin * T_SOL (vendor peak rates) is impossible
    measured_sol_margin: float = 0.25  # a probed roofline is no physical bound: only flag gross violations
    host_clock_floor_ms: float = 0.05  # off the GPU, bounds under this (or the empty calls' jitter) prove nothing
    time_reference: bool = True
    launch_preroll_us: float = LAUNCH_PREROLL_US  # CUDA: host launch time left out of the window (timing.py)
    # CUDA: "stream" spins one thread on the timed stream; "device" holds every SM (device_preroll.py), so
    # no side-stream work can run beside it. "stream" stays the default until "device" has run on a GPU.
    preroll_kind: str = "stream"
    pin_worker_cpus: bool = True  # CUDA: run the candidate's process on the GPU's local CPUs (affinity.py)
    # CUDA: "events" times the call between CUDA events after the pre-roll; "cupti" takes upstream's window,
    # first GPU activity to last on any stream (device_window.py), and needs no pre-roll.
    timer: str = "events"
    # "shared": the candidate reads and writes the judge's buffers, mapped into its process (CUDA IPC on a GPU).
    # "private": its process's own copies, filled and emptied around each call outside the timed window
    # (worker.BufferSets). On an H200 the two read the 16 bundled rows' best candidates alike (geomean 1.001,
    # bench/buffers_ab.py): shared stays the default, without the copies' time and memory.
    buffers: str = "shared"

    def __post_init__(self) -> None:
        if self.preroll_kind not in PREROLL_KINDS:
            raise ValueError(f"JudgeConfig.preroll_kind: {self.preroll_kind!r} is not one of {', '.join(PREROLL_KINDS)}")
        if self.timer not in TIMERS:
            raise ValueError(f"JudgeConfig.timer: {self.timer!r} is not one of {', '.join(TIMERS)}")
        if self.buffers not in BUFFER_MODES:
            raise ValueError(f"JudgeConfig.buffers: {self.buffers!r} is not one of {', '.join(BUFFER_MODES)}")
        try:
            self.plan()
        except ValueError as e:
            raise ValueError(f"JudgeConfig: {e} (iterations, min_iterations, time_budget_s)") from None

    def plan(self) -> TimingPlan:
        return TimingPlan(self.warmup, self.min_iterations, self.iterations, self.time_budget_s)


@dataclass
class _Context:
    problem: Problem
    solution: Solution
    config: JudgeConfig
    reference: Reference
    device: torch.device
    env: Environment
    seed: int
    input_ctx: InputContext
    arena: SharedArena | None = None
    phase: dict[str, float] = field(default_factory=dict)

    def subject(self) -> Subject:
        return Subject(self.problem.definition, self.reference, self.device, self.input_ctx, self.arena)

    def add_phase(self, name: str, since: float) -> None:
        self.phase[name] = self.phase.get(name, 0.0) + time.monotonic() - since


def environment(device: torch.device, sandbox_desc: str | None) -> Environment:
    libs = {"torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        libs["cuda"] = str(torch.version.cuda)
        hw = torch.cuda.get_device_name(device)
    else:
        hw = f"cpu ({platform.machine()}, {os.cpu_count()} cores)"
    for mod in ("triton",):
        try:
            libs[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return Environment(hardware=hw, libs=libs, sandbox=sandbox_desc)


def _snapshot(path: Path) -> str:
    """A fingerprint of the problem directory, to detect a candidate writing into it."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@dataclass
class _WorkerSlot:
    """A worker process for one solution, started on first use and again after it was dropped. ``spawn`` starts
    the process ahead of use (it imports torch and sets up the device meanwhile); ``get`` makes it ready."""

    ctx: _Context
    solution: Solution
    staged: Staged
    env: dict[str, str]
    module_path: Path | None = None
    cpus: frozenset[int] | None = None
    worker: Worker | None = None  # ready for requests
    spawned: Worker | None = None  # started, not yet ready
    starts: int = 0
    peers: list["_WorkerSlot"] = field(default_factory=list)  # other workers of this evaluation, spared at drop
    told: set[str] = field(default_factory=set)  # the candidate's "solforge ..." lines already put in a trace

    def spawn(self) -> None:
        if self.worker is None and self.spawned is None:
            cfg, spec, t0 = self.ctx.config, self.solution.spec, time.monotonic()
            try:
                self.spawned = spawn_worker(
                    self.staged, str(self.ctx.device), spec.entry_file, spec.entry_function,
                    spec.destination_passing_style, self.module_path, self.env, cfg.timeout_s, self.starts,
                    cfg.launch_preroll_us, self.cpus, cfg.preroll_kind, cfg.timer, cfg.buffers,
                )  # fmt: skip
            finally:
                self.starts += 1
                self.ctx.add_phase("start", t0)

    def get(self) -> Worker:
        if self.worker is None:
            self.spawn()
            spawned, self.spawned, t0 = self.spawned, None, time.monotonic()
            try:
                self.worker = handshake(spawned)
            finally:
                self.ctx.add_phase("start", t0)
        return self.worker

    def processes(self) -> set[int]:
        return set().union(*(w.family() for w in (self.worker, self.spawned) if w is not None))

    def drop(self) -> None:
        spare = set().union(*(p.processes() for p in self.peers))
        for w in (self.worker, self.spawned):
            if w is not None:
                w.stop(spare)
        self.worker = self.spawned = None


def _method(ctx: _Context) -> str:
    cfg = ctx.config
    return timing_method(cfg.timer, cfg.launch_preroll_us, cfg.preroll_kind) if ctx.device.type == "cuda" else ""


def _buffers(ctx: _Context, w: Workload, worker: Worker) -> WorkloadBuffers:
    """Buffer sets for ``w`` in ``worker``; the candidate and the reference get the same input content."""
    cfg = ctx.config
    buf = WorkloadBuffers(ctx.subject(), w, worker, sub_seed(ctx.seed, w.uuid), time.monotonic() + cfg.timeout_s,
                          cfg.timeout_s)  # fmt: skip
    buf.add_sets()
    return buf


def _run(ctx: _Context, buf: WorkloadBuffers) -> TimedRun:
    cfg = ctx.config
    # Under the CUPTI window every timed request opens and closes a profiler session, whose cost drifts
    # in a long-lived process (about 1 ms above the empty calls measured before load, on an H200): empty
    # requests interleaved with the timed ones are then the fair comparison for the clock backstop. On the
    # CPU an empty request precedes every timed one: the reference's measure the fixed cost of a request at
    # the time and under the load the calls are timed with (see _time_both).
    if ctx.device.type == "cuda":
        empty_every = 4 if cfg.timer == "cupti" else 0
    else:
        empty_every = 1
    return TimedRun(buf, cfg.plan(), _method(ctx), cfg.check_every, empty_every)


def _retimed_with_events(ctx: _Context, buf: WorkloadBuffers) -> TimedPhase:
    """The candidate's calls on ``buf`` timed again, alone, under the worker's event timer."""
    cfg = ctx.config
    t0 = time.monotonic()
    run = TimedRun(buf, cfg.plan(), timing_method("events", cfg.launch_preroll_us, cfg.preroll_kind),
                   cfg.check_every, empty_every=4, timer="events")  # fmt: skip
    run.warm_up()
    for i in range(run.n):
        run.step(i)
    ctx.add_phase("retiming", t0)
    return run.result()


class _AsReference:
    """Turns a failure of the reference's worker into INVALID_REFERENCE (and drops that worker)."""

    def __init__(self, slot: _WorkerSlot):
        self.slot = slot

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, err, tb) -> bool:
        if isinstance(err, CandidateFailure):
            self.slot.drop()
            raise ReferenceFailure(
                f"the reference, timed as candidates are, failed ({err.status.value}): {_first_line(str(err))}"
            ) from err
        return False


def _time_both(ctx: _Context, w: Workload, worker: Worker, reference: _WorkerSlot | None):
    """Correctness rounds of the candidate, then the candidate and the reference timed in alternation."""
    cfg = ctx.config
    buf = _buffers(ctx, w, worker)
    t0 = time.monotonic()
    correctness_rounds(buf, cfg.correctness_rounds)
    ctx.add_phase("correctness", t0)
    t0 = time.monotonic()
    cand = _run(ctx, buf)
    cand.warm_up()
    ref = None
    if reference is not None:
        with _AsReference(reference):
            ref = _run(ctx, _buffers(ctx, w, reference.get()))
            ref.warm_up()
    for i in range(max(cand.n, ref.n if ref else 0)):
        if i < cand.n:
            cand.step(i)
        if ref is not None and i < ref.n:
            with _AsReference(reference):
                ref.step(i)
    ctx.add_phase("timing", t0)
    # CPU: both subjects' samples are the judge's clock less one fixed cost per request, that of the
    # reference's worker (trusted code, so a candidate cannot inflate it) measured alongside the calls. Each
    # worker's own empty requests measured at its start saw whatever load the machine had then: on a busy
    # two-core machine that alone put the same code at 0.3-0.7x of itself.
    overhead = ref.empty_ms() if ref is not None and ctx.device.type != "cuda" else None
    return buf, cand.result(overhead), ref.result(overhead) if ref else None


def _no_side_stream_leak(timed: TimedPhase, gap_ms: float) -> None:
    # Side-stream work is timed; only a gross leak, work hidden on purpose, is flagged.
    leak = statistics.median(timed.leaks_ms) - gap_ms
    if leak > 0.1 + 0.5 * timed.stats.median_ms:
        raise RewardHack(f"work continued on another stream {leak:.3f} ms after the timed stream finished (side stream)")


def _plausible(
    ctx: _Context, w: Workload, worker: Worker, timed: TimedPhase, retime: Callable[[], TimedPhase]
) -> tuple[TimingStats, float | None, str | None, str]:
    """The checks of a candidate's times against physics and the judge's clock; returns the times it is charged
    (the timer's, or, where the judge's clock disputes the CUPTI window, the event timer's), T_SOL, its model, a
    note. ``retime``: the same calls timed again under the worker's event timer."""
    cfg, stats, on_cuda = ctx.config, timed.stats, ctx.device.type == "cuda"
    notes = []
    # Both checks compare with empty requests (the worker's timed path, no candidate code called): the leak
    # check with those measured before the candidate's code was loaded; the clock backstop with those too,
    # or under the CUPTI window with the ones interleaved with the timed calls.
    if on_cuda:
        _no_side_stream_leak(timed, worker.noop_gap_ms)
        empty_ms = statistics.median(timed.late_empty_ms) if timed.late_empty_ms else worker.noop_wall_ms
        wall_ms = statistics.median(timed.walls_ms)
        if cfg.timer == "cupti" and (excess := host_time_outside_window(stats.median_ms, wall_ms, empty_ms)):
            # No evidence of cheating under this timer: the window leaves out host time before the first kernel,
            # and the judge's clock also holds the profiler's handling of every kernel record (a graph of
            # hundreds of kernels reads milliseconds more than an empty call). The event timer has neither:
            # it counts host time past the pre-roll, and there the backstop's disagreement is a forged report.
            again = retime()
            _no_side_stream_leak(again, again.noop_gap_ms)
            again_empty = statistics.median(again.late_empty_ms)
            if (why := clock_disagreement(again.stats.median_ms, statistics.median(again.walls_ms), again_empty)):
                raise RewardHack(f"{why}, re-timed under the event timer")
            notes.append(f"the device window saw {stats.median_ms:.4f} ms per call, the judge's clock {excess:.4f} "
                         f"ms more than an empty call: re-timed under the event timer, {again.stats.median_ms:.4f} "
                         "ms, and charged that")  # fmt: skip
            stats = again.stats
        elif cfg.timer != "cupti" and (why := clock_disagreement(stats.median_ms, wall_ms, empty_ms)) is not None:
            raise RewardHack(why)  # the event timer counts host time past the pre-roll: only a forged report
    t_sol, hw_name, sol_note = sol_floor(ctx.problem.definition, w, cfg.hardware, ctx.device)
    notes.append(sol_note)
    margin = cfg.measured_sol_margin if (hw_name or "").startswith("measured") else cfg.sol_margin
    if t_sol is not None:
        if on_cuda:
            beaten = stats.median_ms < margin * t_sol
            seen_ms = stats.median_ms
        else:
            seen_ms = statistics.median(timed.walls_ms) - worker.noop_wall_min_ms
            noise_ms = max(cfg.host_clock_floor_ms, worker.noop_wall_spread_ms)
            beaten = below_sol_on_host_clock(seen_ms, noise_ms, margin * t_sol)
        if beaten:
            raise RewardHack(f"median latency {seen_ms:.5f} ms is below the speed-of-light bound {t_sol:.5f} ms")
    return stats, t_sol, hw_name, "; ".join(n for n in notes if n)


def _judge_workload(ctx: _Context, w: Workload, worker: Worker, reference: _WorkerSlot | None):
    buf, timed, ref_timed = _time_both(ctx, w, worker, reference)
    stats, t_sol, hw_name, sol_note = _plausible(ctx, w, worker, timed, lambda: _retimed_with_events(ctx, buf))
    ref_stats = ref_timed.stats if ref_timed else None
    acc = buf.stats
    correctness = Correctness(
        max_relative_error=acc.max_rel, max_absolute_error=acc.max_abs, has_nan=False, has_inf=False,
        matched_ratio=acc.matched, rounds=acc.rounds, timed_runs_checked=acc.timed_checked,
    )  # fmt: skip
    ref_ms = ref_stats.median_ms if ref_stats else stats.median_ms
    on_cuda = ctx.device.type == "cuda"
    performance = Performance(
        latency_ms=stats.median_ms,
        reference_latency_ms=ref_ms,
        speedup_factor=ref_ms / stats.median_ms,
        latency_iqr_ms=stats.iqr_ms,
        reference_iqr_ms=ref_stats.iqr_ms if ref_stats else None,
        iterations=len(stats.samples_ms),
        timing_method=stats.method,
        sm_clock_mhz=stats.sm_clock_mhz,
        host_bound_fraction=stats.extra.get("host_bound_fraction") if on_cuda else None,
        reference_host_bound_fraction=ref_stats.extra.get("host_bound_fraction") if ref_stats else None,
    )
    return correctness, performance, t_sol, hw_name, sol_note


# ------------------------------------------------------------------------------------------- driver

TOLD_PREFIX = "solforge "  # lines a candidate prints to say what it chose (the offline agent's candidates do)


def _told(slot: _WorkerSlot, limit: int = 20) -> str:
    """The candidate's output lines starting with ``TOLD_PREFIX`` not yet put in a trace (its own account of a
    choice, e.g. which way the tuned reference kept for this signature): untrusted text, shown, never read."""
    if slot.worker is None:
        return ""
    lines = [x[:300] for x in slot.worker.log_tail(64000).splitlines() if x.startswith(TOLD_PREFIX)]
    new = [x for x in dict.fromkeys(lines) if x not in slot.told][:limit]
    slot.told.update(new)
    return "\n".join(new)


def _trace(ctx: _Context, w: Workload, status: Status, text: str = "", reason: str | None = None, **kw) -> Trace:
    ev = Evaluation(
        status=status,
        log=text[-8000:],
        environment=ctx.env,
        reason=reason,
        seed=ctx.seed,
        device=str(ctx.device),
        phase_seconds={k: round(v, 4) for k, v in ctx.phase.items()},
        **kw,
    )
    return Trace(definition=ctx.problem.name, solution=ctx.solution.name, workload=w, evaluation=ev)


def _first_line(text: str) -> str:
    """One line that says what went wrong: a Python traceback's exception (its last unindented line, before the
    candidate's own output appended to it), else the first line with text."""
    lines = [x for x in str(text).split(OUTPUT_MARK, 1)[0].splitlines() if x.strip()]
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        raised = [x for x in lines if not x[0].isspace() and not x.startswith(("Traceback", "During handling",
                                                                                "The above exception"))]
        if raised:
            return raised[-1].strip()[:300]
    return lines[0].strip()[:300] if lines else ""


def _reference_slot(ctx: _Context, cpus: frozenset[int] | None) -> _WorkerSlot:
    solution = reference_solution(ctx.problem.definition)
    staged = stage(solution, ctx.config.staging_root)
    return _WorkerSlot(ctx, solution, staged, candidate_env(staged, str(ctx.device)), cpus=cpus)


def evaluate(
    problem: Problem,
    solution: Solution,
    config: JudgeConfig = JudgeConfig(),
    on_trace: Callable[[Trace], None] | None = None,
) -> list[Trace]:
    """Judge ``solution`` on every workload of ``problem``. Never raises for a candidate's failure."""
    if solution.definition != problem.name:
        raise SolutionError(
            f"solution is for {solution.definition!r}, the problem is {problem.name!r}", field="definition"
        )
    device = torch.device(config.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SolutionError(f"device {config.device!r} requested but no CUDA device is available", field="--device")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    check_blobs(problem.workloads, InputContext(problem_dir=problem.path, data_root=config.data_root),
                str(problem.path / "workload.jsonl"))
    seed = config.seed if config.seed is not None else fresh_seed()
    ctx = _Context(
        problem=problem,
        solution=solution,
        config=config,
        reference=None,  # type: ignore[arg-type]
        device=device,
        env=environment(device, None),
        seed=seed,
        input_ctx=InputContext(problem_dir=problem.path, data_root=config.data_root),
    )
    traces: list[Trace] = []

    def emit(t: Trace) -> None:
        traces.append(t)
        if on_trace:
            on_trace(t)

    def emit_all(status: Status, text: str, reason: str | None = None) -> list[Trace]:
        for w in problem.workloads:
            emit(_trace(ctx, w, status, text, reason or _first_line(text)))
        return traces

    try:
        ctx.reference = load_reference(problem.definition)
    except ReferenceFailure as e:
        return emit_all(Status.INVALID_REFERENCE, str(e))

    t0 = time.monotonic()
    try:
        check_shadowing(solution)
        staged = stage(solution, config.staging_root)
    except RewardHack as e:
        return emit_all(Status.REWARD_HACK, str(e))
    module_path = None
    is_triton = Language.triton in solution.spec.languages
    env = candidate_env(staged, str(device), interpret_triton=is_triton and device.type == "cpu")
    if solution.spec.is_cpp:
        try:
            built = run_build(plan_build(solution, staged, str(device), env), config.compile_timeout_s)
        except (CompileFailure, CandidateTimeout) as e:
            ctx.phase["compile"] = time.monotonic() - t0
            return emit_all(e.status, str(e), "build failed" if isinstance(e, CompileFailure) else None)
        if built.module_path is None:
            ctx.phase["compile"] = time.monotonic() - t0
            return emit_all(
                Status.RUNTIME_ERROR,
                built.log,
                f"compiled only: CUDA sources cannot run on device {device} (built for sm_90a)",
            )
        module_path = built.module_path
    ctx.phase["compile"] = time.monotonic() - t0

    ctx.arena = SharedArena(device)  # CUDA: a pool apart from the judge's own (reference) memory
    sandbox.become_subreaper()
    before = _snapshot(problem.path)
    cpus = gpu_local_cpus(device) if config.pin_worker_cpus else None
    candidate = _WorkerSlot(ctx, solution, staged, env, module_path, cpus)
    reference = _reference_slot(ctx, cpus) if config.time_reference else None
    if reference is not None:
        candidate.peers.append(reference)
        reference.peers.append(candidate)
    load_failure: CandidateFailure | None = None
    try:
        for w in problem.workloads:
            try:
                if load_failure is not None:
                    raise load_failure
                if candidate.worker is None:
                    try:
                        worker = candidate.get()
                    except (CompileFailure, CandidateTimeout) as e:
                        load_failure = e
                        raise
                    sandboxed, buffers = worker.info.get("sandbox", "unknown"), worker.info.get("buffers", "unknown")
                    if reference is not None:  # its start overlaps the candidate's correctness rounds (and at most its
                        reference.spawn()  # warm-up, which only sets the timed count), never a timed call
                    ctx.env = environment(device, f"{sandboxed}; buffers: {buffers}")
                correctness, performance, t_sol, hw, note = _judge_workload(ctx, w, candidate.get(), reference)
                if _snapshot(problem.path) != before:
                    raise RewardHack("the problem directory changed while the candidate ran")
                note = "\n".join(x for x in (note, _told(candidate)) if x)
                emit(_trace(ctx, w, Status.PASSED, note, None, correctness=correctness, performance=performance,
                            t_sol_ms=t_sol, sol_hardware=hw))  # fmt: skip
            except CandidateFailure as e:
                stats = getattr(e, "stats", None)
                corr = None
                if stats is not None:
                    corr = Correctness(
                        max_relative_error=stats.max_relative_error, max_absolute_error=stats.max_absolute_error,
                        has_nan=stats.has_nan, has_inf=stats.has_inf, matched_ratio=stats.matched_ratio,
                    )  # fmt: skip
                emit(_trace(ctx, w, e.status, str(e), _first_line(str(e)), correctness=corr))
                if not isinstance(e, WrongNumbers):
                    candidate.drop()
            except ReferenceFailure as e:
                emit(_trace(ctx, w, Status.INVALID_REFERENCE, str(e), _first_line(str(e))))
            if device.type == "cuda":  # this workload's reference outputs and checks: memory the workers may need
                torch.cuda.empty_cache()
    finally:
        candidate.drop()
        if reference is not None:
            reference.drop()
        ctx.arena.close()
    return traces
