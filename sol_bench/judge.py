"""Judge one candidate on every workload of a problem: one Trace per workload, always.

The judge's process holds the inputs, the reference outputs and the verdicts. Candidate code runs in a
separate, sandboxed process (``sol_bench.worker``) that receives input and output buffers shared with the
judge's memory (never the reference outputs) and answers with JSON. Per workload:

1. correctness rounds: fresh inputs, outputs poisoned with NaN, reference computed on a private copy,
   inputs checked unchanged after the call;
2. warm-up;
3. timed iterations: fresh input content every iteration, L2 flushed, a random sample of iterations has
   its outputs and inputs verified too; threads/processes of the candidate watched; stream leaks,
   pinned L2, clock disagreements and times under the speed-of-light bound become REWARD_HACK;
4. the reference is timed with the same protocol in the judge's process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from . import sandbox
from .affinity import gpu_local_cpus
from .build import plan_build, run_build
from .correctness import compare, first_mismatches
from .errors import (
    CandidateFailure,
    CandidateTimeout,
    CompileFailure,
    ReferenceFailure,
    RewardHack,
    SolutionError,
    WrongNumbers,
)
from .inputs import InputContext, check_blobs, fresh_seed, make_inputs, output_specs, sub_seed
from .models import (
    Correctness,
    Environment,
    Evaluation,
    Language,
    Performance,
    Solution,
    Status,
    Trace,
    Workload,
)
from .problem import Problem
from .reference import Reference, load_reference
from .runner import Worker, candidate_env, start_worker
from .worker import BUFFER_MODES
from .shared import SharedArena
from .staging import check_shadowing, stage
from .timing import (
    LAUNCH_PREROLL_US, PREROLL_KINDS, TIMERS, sm_clock_mhz, summarize, time_callable, timing_method,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeConfig:
    device: str = "cpu"
    timeout_s: float = 300.0  # per workload, candidate time in total
    compile_timeout_s: float = 600.0
    seed: int | None = None
    correctness_rounds: int = 3
    warmup: int = 10
    iterations: int = 50
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
    # (worker.BufferSets), as the reference is timed on its own process's memory. On an H200 the two read the
    # 16 bundled rows' best candidates alike (geomean 1.001, bench/buffers_ab.py, session 15): shared stays the
    # default, without the copies' time and memory.
    buffers: str = "shared"

    def __post_init__(self) -> None:
        if self.preroll_kind not in PREROLL_KINDS:
            raise ValueError(f"JudgeConfig.preroll_kind: {self.preroll_kind!r} is not one of {', '.join(PREROLL_KINDS)}")
        if self.timer not in TIMERS:
            raise ValueError(f"JudgeConfig.timer: {self.timer!r} is not one of {', '.join(TIMERS)}")
        if self.buffers not in BUFFER_MODES:
            raise ValueError(f"JudgeConfig.buffers: {self.buffers!r} is not one of {', '.join(BUFFER_MODES)}")


@dataclass
class _Set:
    """One input/output buffer set shared with the candidate process."""

    inputs: list[Any]
    outputs: list[torch.Tensor]


@dataclass
class _Acc:
    max_abs: float = 0.0
    max_rel: float = 0.0
    matched: float = 1.0
    rounds: int = 0
    timed_checked: int = 0

    def add(self, c) -> None:
        self.max_abs = max(self.max_abs, c.max_absolute_error)
        self.max_rel = max(self.max_rel, c.max_relative_error)
        self.matched = min(self.matched, c.matched_ratio)


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


def _sol_floor(ctx: _Context, w: Workload) -> tuple[float | None, str | None, str]:
    """T_SOL for this workload on this device, or (None, None, why)."""
    try:
        from .sol.analyze import analyze_workload
        from .sol.hardware import get_hardware
    except ImportError:
        return None, None, "speed-of-light analyzer not available"
    try:
        hw = get_hardware(ctx.config.hardware, str(ctx.device))
        res = analyze_workload(ctx.problem.definition, w, hw)
    except Exception as e:  # noqa: BLE001 - an analysis gap must not fail the candidate; it is logged
        return None, None, f"speed-of-light analysis failed: {type(e).__name__}: {e}"
    return float(res.t_sol_ms), str(getattr(hw, "name", ctx.config.hardware)), ""


def below_sol_on_host_clock(upper_ms: float, noise_ms: float, bound_ms: float) -> bool:
    """Whether a host-clock time proves a call beat the speed-of-light bound.

    `upper_ms` is the median call less the *fastest* empty call, so it over-states the candidate's own time;
    `noise_ms` is the jitter of the empty calls (or a floor, whichever is larger). A bound inside it is below
    what the clock resolves (tiny CPU workloads have T_SOL of nanoseconds), so it proves nothing either way.
    """
    return bound_ms > noise_ms and upper_ms < bound_ms


def clock_disagreement(reported_ms: float, call_wall_ms: float, empty_wall_ms: float) -> str | None:
    """Why the judge's clock contradicts a reported time, or None: a backstop for gross lies only.

    `call_wall_ms` and `empty_wall_ms` are the judge-clock medians of a timed request and of an empty one
    (same path, nothing called). Real calls also pay GPU context switches between the judge's and the
    candidate's process that the empty call does not (about 0.5 ms seen on an H200), hence the slack.
    """
    excess = call_wall_ms - empty_wall_ms
    if reported_ms * 3 + 1.0 < excess:
        return (
            f"reported {reported_ms:.4f} ms per call but the judge's clock saw {excess:.4f} ms more than an empty "
            f"call ({call_wall_ms:.4f} against {empty_wall_ms:.4f} ms; timer tampering)"
        )
    return None


# --------------------------------------------------------------------------------------- buffers


def _alloc_like(ctx: _Context, shape, dtype) -> torch.Tensor:
    return ctx.arena.alloc(tuple(shape), dtype)


def _share(ctx: _Context, x: Any) -> Any:
    if not isinstance(x, torch.Tensor):
        return x
    buf = _alloc_like(ctx, x.shape, x.dtype)
    buf.copy_(x)
    return buf


def _poison(t: torch.Tensor) -> None:
    if t.is_floating_point() and t.element_size() >= 2:
        t.fill_(float("nan"))
    else:
        t.view(torch.uint8).random_(0, 256) if t.dtype != torch.bool else t.random_(0, 2)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    # reshape(-1): a 0-d tensor cannot be viewed as bytes
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def _reference_outputs(ctx: _Context, w: Workload, inputs: list[Any]) -> list[torch.Tensor]:
    names = list(ctx.problem.definition.outputs)
    specs = output_specs(ctx.problem.definition, w)
    try:
        with torch.no_grad():
            out = ctx.reference.run(*inputs)
    except Exception as e:
        raise ReferenceFailure(f"reference raised {type(e).__name__}: {e}") from e
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(names):
        raise ReferenceFailure(f"reference returned {len(outs)} outputs, the definition has {len(names)}")
    result = []
    for name, o in zip(names, outs):
        if not isinstance(o, torch.Tensor):
            o = torch.tensor(o, device=ctx.device)
        shape, dtype = specs[name]
        if tuple(o.shape) != tuple(shape) or o.dtype != dtype:
            raise ReferenceFailure(
                f"reference output {name!r} is {tuple(o.shape)} {o.dtype}, the definition says {tuple(shape)} {dtype}"
            )
        result.append(o)
    return result


class _Workload:
    """State of one workload's evaluation (buffer sets and the worker)."""

    def __init__(self, ctx: _Context, w: Workload, worker: Worker, deadline: float):
        self.ctx, self.w, self.worker, self.deadline = ctx, w, worker, deadline
        self.wseed = sub_seed(ctx.seed, w.uuid)
        self.specs = output_specs(ctx.problem.definition, w)
        self.sets: list[_Set] = []
        self.acc = _Acc()

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CandidateTimeout(f"workload exceeded {self.ctx.config.timeout_s:.0f} s")
        return left

    def fresh_inputs(self, seed: int) -> list[Any]:
        made = make_inputs(self.ctx.problem.definition, self.w, self.ctx.device, seed, self.ctx.reference, self.ctx.input_ctx)
        return list(made.values())

    def add_set(self, j: int) -> None:
        inputs = [_share(self.ctx, x) for x in self.fresh_inputs(sub_seed(self.wseed, "set", j))]
        outputs = [_alloc_like(self.ctx, s, d) for s, d in self.specs.values()]
        self.sets.append(_Set(inputs, outputs))
        self.worker.request(("register", j, *self.wire(inputs, outputs)), self.remaining())

    def wire(self, inputs: list[Any], outputs: list[torch.Tensor]) -> tuple[list[Any], list[Any]]:
        arena = self.ctx.arena
        return [arena.wire(x) for x in inputs], [arena.wire(o) for o in outputs]

    def refill(self, j: int, seed: int) -> None:
        new = self.fresh_inputs(seed)
        s = self.sets[j]
        if any(isinstance(b, torch.Tensor) and (b.shape != n.shape or b.dtype != n.dtype) for b, n in zip(s.inputs, new)):
            s.inputs = [_share(self.ctx, x) for x in new]  # custom inputs whose shapes vary: new buffers
            self.worker.request(("register", j, *self.wire(s.inputs, s.outputs)), self.remaining())
        else:
            for b, n in zip(s.inputs, new):
                if isinstance(b, torch.Tensor):
                    b.copy_(n)
        for o in s.outputs:
            _poison(o)

    def sync(self) -> None:
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)

    def snapshot(self, j: int) -> tuple[list[Any], list[torch.Tensor]]:
        """Copies of set ``j``'s inputs and outputs as they are now, for a check made later."""
        s = self.sets[j]
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in s.inputs], [o.clone() for o in s.outputs]

    def check(
        self,
        j: int,
        saved: list[Any],
        ref: list[torch.Tensor],
        timed_iteration: int | None,
        seen: tuple[list[Any], list[torch.Tensor]] | None = None,
    ) -> None:
        """Inputs unchanged and outputs right: set ``j``'s buffers, or ``seen`` (a ``snapshot`` of them)."""
        s = self.sets[j]
        inputs, outputs = seen if seen is not None else (s.inputs, s.outputs)
        names_in = list(self.ctx.problem.definition.inputs)
        for name, b, c in zip(names_in, inputs, saved):
            if isinstance(b, torch.Tensor) and not _same_bits(b, c):
                raise RewardHack(f"input {name!r} was modified by the candidate")
        for name, o, r in zip(self.specs, outputs, ref):
            try:
                c = compare(name, o, r, self.w.tolerance)
            except WrongNumbers as e:
                if timed_iteration is not None:
                    raise RewardHack(
                        f"outputs of timed iteration {timed_iteration} are wrong although the correctness rounds "
                        f"passed (work skipped or outputs cached in the timing phase): {e}"
                    ) from None
                detail = "\n".join(first_mismatches(o, r, self.w.tolerance))
                raise WrongNumbers(f"{e}\nfirst mismatches:\n{detail}" if detail else str(e), e.stats) from None
            self.acc.add(c)

    def prepare_check(self, j: int) -> tuple[list[Any], list[torch.Tensor]]:
        saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.sets[j].inputs]
        ref = _reference_outputs(self.ctx, self.w, [x.clone() if isinstance(x, torch.Tensor) else x for x in saved])
        return saved, ref


def _judge_workload(ctx: _Context, w: Workload, worker: Worker) -> tuple[Correctness, Performance, float | None, str | None, str]:
    cfg = ctx.config
    st = _Workload(ctx, w, worker, time.monotonic() + cfg.timeout_s)
    n_sets = 2
    for j in range(n_sets):
        st.add_set(j)

    # 1. correctness rounds
    t0 = time.monotonic()
    for r in range(max(1, cfg.correctness_rounds)):
        j = r % n_sets
        st.refill(j, sub_seed(st.wseed, "round", r))
        saved, ref = st.prepare_check(j)
        st.sync()
        worker.request(("call", j), st.remaining())
        st.check(j, saved, ref, None)
        st.acc.rounds += 1
    ctx.phase["correctness"] = ctx.phase.get("correctness", 0.0) + time.monotonic() - t0

    # 2. warm-up, then the baseline of the candidate's threads and processes
    t0 = time.monotonic()
    for i in range(cfg.warmup):
        worker.request(("time", i % n_sets), st.remaining())
    base_threads = sandbox.thread_count(worker.pid)
    base_children = sandbox.descendants(worker.pid)

    # 3. timed iterations
    rng = random.Random(sub_seed(st.wseed, "sample"))
    sampled = {i for i in range(cfg.iterations) if rng.random() < 1.0 / max(1, cfg.check_every)}
    sampled.add(cfg.iterations - 1)
    samples, walls, leaks, host_bound, late_empty = [], [], [], 0, []
    # Under the CUPTI window every timed request opens and closes a profiler session, whose cost drifts
    # in a long-lived process (about 1 ms above the empty calls measured before load, on an H200): empty
    # requests interleaved with the timed ones are then the fair comparison for the clock backstop.
    empty_every = 4 if ctx.device.type == "cuda" and cfg.timer == "cupti" else 0
    for i in range(cfg.iterations):
        if empty_every and i % empty_every == 0:
            st.sync()
            p0 = time.perf_counter()
            worker.request(("time_noop",), st.remaining())
            late_empty.append((time.perf_counter() - p0) * 1e3)
        j = i % n_sets
        st.refill(j, sub_seed(st.wseed, "timed", i))
        check = st.prepare_check(j) if i in sampled else None
        st.sync()
        p0 = time.perf_counter()
        reply = worker.request(("time", j), st.remaining())
        wall_ms = (time.perf_counter() - p0) * 1e3
        # Copied first, before the slower checks below: work that a thread of the candidate finishes after the
        # reply (a cheat) must not catch up with the check while the judge reads /proc.
        seen = st.snapshot(j) if check is not None else None
        t_worker, t_all, flags = float(reply[1]), float(reply[2]), list(reply[3])
        if "persisting-l2" in flags:
            raise RewardHack("the candidate set aside persisting L2 cache (data pinned across timed runs)")
        host_bound += "host-bound" in flags
        if "profiler-restarted" in flags:
            raise RewardHack("the timing profiler's session was stopped or replaced during a timed call (timer tampering)")
        if "no-device-activity" in flags:
            raise RewardHack("the profiler saw no GPU work during a timed call, yet outputs are expected on the GPU")
        if ctx.device.type == "cuda":
            # All streams count: the later of the timed stream's end and the device going idle (less the
            # sync gap of an empty call, measured before the candidate loaded).
            samples.append(max(t_worker, t_all - worker.noop_gap_ms))
            leaks.append(max(0.0, t_all - t_worker))
        else:
            samples.append(max(wall_ms - worker.noop_wall_ms, 1e-6))
        walls.append(wall_ms)
        if sandbox.thread_count(worker.pid) > base_threads:
            raise RewardHack("the candidate started a thread during the timing phase")
        if sandbox.descendants(worker.pid) - base_children:
            raise RewardHack("the candidate started a process during the timing phase")
        if check is not None:
            st.check(j, check[0], check[1], i, seen)
            st.acc.timed_checked += 1
    ctx.phase["timing"] = ctx.phase.get("timing", 0.0) + time.monotonic() - t0

    on_cuda = ctx.device.type == "cuda"
    method = timing_method(cfg.timer, cfg.launch_preroll_us, cfg.preroll_kind) if on_cuda else "judge_perf_counter"
    stats = summarize(samples, method)
    # Both checks compare with empty requests (the worker's timed path, no candidate code called): the leak
    # check with those measured before the candidate's code was loaded; the clock backstop with those too,
    # or under the CUPTI window with the ones interleaved above.
    if ctx.device.type == "cuda":
        # Side-stream work is timed (above); only a gross leak, work hidden on purpose, is flagged.
        leak = statistics.median(leaks) - worker.noop_gap_ms
        if leak > 0.1 + 0.5 * stats.median_ms:
            raise RewardHack(
                f"work continued on another stream {leak:.3f} ms after the timed stream finished (side stream)"
            )
        empty_ms = statistics.median(late_empty) if late_empty else worker.noop_wall_ms
        if (why := clock_disagreement(stats.median_ms, statistics.median(walls), empty_ms)) is not None:
            raise RewardHack(why)
    t_sol, hw_name, sol_note = _sol_floor(ctx, w)
    margin = cfg.measured_sol_margin if (hw_name or "").startswith("measured") else cfg.sol_margin
    if t_sol is not None:
        if on_cuda:
            beaten = stats.median_ms < margin * t_sol
            seen_ms = stats.median_ms
        else:
            seen_ms = statistics.median(walls) - worker.noop_wall_min_ms
            noise_ms = max(cfg.host_clock_floor_ms, worker.noop_wall_spread_ms)
            beaten = below_sol_on_host_clock(seen_ms, noise_ms, margin * t_sol)
        if beaten:
            raise RewardHack(f"median latency {seen_ms:.5f} ms is below the speed-of-light bound {t_sol:.5f} ms")

    # 4. the reference, same protocol, in the judge's process
    t0 = time.monotonic()
    ref_stats = _time_reference(ctx, st) if cfg.time_reference else None
    ctx.phase["reference"] = ctx.phase.get("reference", 0.0) + time.monotonic() - t0

    acc = st.acc
    correctness = Correctness(
        max_relative_error=acc.max_rel, max_absolute_error=acc.max_abs, has_nan=False, has_inf=False,
        matched_ratio=acc.matched, rounds=acc.rounds, timed_runs_checked=acc.timed_checked,
    )  # fmt: skip
    ref_ms = ref_stats.median_ms if ref_stats else stats.median_ms
    performance = Performance(
        latency_ms=stats.median_ms,
        reference_latency_ms=ref_ms,
        speedup_factor=ref_ms / stats.median_ms,
        latency_iqr_ms=stats.iqr_ms,
        reference_iqr_ms=ref_stats.iqr_ms if ref_stats else None,
        iterations=len(samples),
        timing_method=stats.method,
        sm_clock_mhz=sm_clock_mhz(ctx.device),
        host_bound_fraction=host_bound / len(samples) if on_cuda else None,
        reference_host_bound_fraction=ref_stats.extra.get("host_bound_fraction") if ref_stats else None,
    )
    return correctness, performance, t_sol, hw_name, sol_note


def _time_reference(ctx: _Context, st: _Workload):
    inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in st.fresh_inputs(sub_seed(st.wseed, "ref", 0))]
    counter = [0]

    def before() -> None:
        counter[0] += 1
        for b, n in zip(inputs, st.fresh_inputs(sub_seed(st.wseed, "ref", counter[0]))):
            if isinstance(b, torch.Tensor) and b.shape == n.shape:
                b.copy_(n)

    def call() -> None:
        with torch.no_grad():
            ctx.reference.run(*inputs)

    try:
        return time_callable(
            call, ctx.device, ctx.config.warmup, ctx.config.iterations, True, before, ctx.config.launch_preroll_us,
            ctx.config.preroll_kind, ctx.config.timer,
        )
    except Exception as e:
        raise ReferenceFailure(f"reference failed while being timed: {type(e).__name__}: {e}") from e


# ------------------------------------------------------------------------------------------- driver


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
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


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
    worker: Worker | None = None
    worker_cpus = gpu_local_cpus(device) if config.pin_worker_cpus else None
    load_failure: CandidateFailure | None = None
    starts = 0
    try:
        for w in problem.workloads:
            try:
                if load_failure is not None:
                    raise load_failure
                if worker is None:
                    t1 = time.monotonic()
                    try:
                        worker = start_worker(
                            staged, str(device), solution.spec.entry_file, solution.spec.entry_function,
                            solution.spec.destination_passing_style, module_path, env, config.timeout_s, starts,
                            config.launch_preroll_us, worker_cpus, config.preroll_kind, config.timer, config.buffers,
                        )  # fmt: skip
                    except (CompileFailure, CandidateTimeout) as e:
                        load_failure = e
                        raise
                    finally:
                        starts += 1
                        ctx.phase["start"] = ctx.phase.get("start", 0.0) + time.monotonic() - t1
                    sandboxed, buffers = worker.info.get("sandbox", "unknown"), worker.info.get("buffers", "unknown")
                    ctx.env = environment(device, f"{sandboxed}; buffers: {buffers}")
                correctness, performance, t_sol, hw, note = _judge_workload(ctx, w, worker)
                if _snapshot(problem.path) != before:
                    raise RewardHack("the problem directory changed while the candidate ran")
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
                if worker is not None and not isinstance(e, (WrongNumbers,)):
                    worker.stop()
                    worker = None
            except ReferenceFailure as e:
                emit(_trace(ctx, w, Status.INVALID_REFERENCE, str(e), _first_line(str(e))))
    finally:
        if worker is not None:
            worker.stop()
        ctx.arena.close()
    return traces
