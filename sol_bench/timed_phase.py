"""The one timing protocol: how the judge times anything in a worker process.

Candidates, the eager reference and every T_b variant are timed by this loop, in a sandboxed worker
(``sol_bench.worker``), so the times that are divided by one another are taken the same way: same timer,
same per-iteration preparation, same statistic.

Per iteration, warm-up included: fresh input content in one of two rotating buffer sets, outputs poisoned,
a device sync, then one ``("time", j)`` request (on CUDA the worker flushes L2 and times the call with its
timer; on the CPU the judge's clock brackets the request, less the median empty request measured before the
subject was loaded). About one iteration in ``check_every`` (random, seeded) plus the last has its outputs
and inputs verified, outside the timed window. The warm-up calls estimate an iteration's cost; the timed
count follows ``TimingPlan``. The statistic is the median, with the interquartile range as its spread.

The judge times the candidate and the reference in alternation (``TimedRun.step``), iteration by iteration,
each in its own worker: on a busy machine (other jobs on two cores, builds beside a GPU) a load spike then
falls on both alike, rather than on whichever happened to be timed during it.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from . import sandbox
from .buffers import WorkloadBuffers
from .errors import RewardHack, WrongNumbers
from .inputs import sub_seed
from .recheck import judge_timed_failure
from .timing import TimingPlan, TimingStats, quantile, sm_clock_mhz, summarize

HOST_METHOD = "judge_perf_counter"


@dataclass(frozen=True)
class TimedPhase:
    """What the timing of one subject on one workload saw."""

    stats: TimingStats
    walls_ms: list[float]  # judge-clock time of each timed request
    leaks_ms: list[float]  # CUDA: the device going idle after the timed stream ended, per call
    late_empty_ms: list[float]  # judge-clock time of empty requests interleaved with the timed ones
    host_bound: int  # CUDA: calls whose host launching outlasted the pre-roll
    noop_gap_ms: float = 0.0  # CUDA: the sync gap of an empty call under this phase's timer


def _flags_verdict(flags: list[str]) -> None:
    if "persisting-l2" in flags:
        raise RewardHack("the candidate set aside persisting L2 cache (data pinned across timed runs)")
    if "profiler-restarted" in flags:
        raise RewardHack("the timing profiler's session was stopped or replaced during a timed call (timer tampering)")
    if "no-device-activity" in flags:
        raise RewardHack("the profiler saw no GPU work during a timed call, yet outputs are expected on the GPU")


def _sampled(seed: int, n: int, check_every: int) -> set[int]:
    rng = random.Random(sub_seed(seed, "sample"))
    chosen = {i for i in range(n) if rng.random() < 1.0 / max(1, check_every)}
    chosen.add(n - 1)
    return chosen


class TimedRun:
    """The timing of one subject on one workload, in steps, so that two subjects (a candidate and the
    reference) can be timed in alternation: load on the machine then falls on both alike.

    ``empty_every``: an empty request before every that many timed ones (under the CUPTI window, whose
    per-request cost drifts, they are the fair comparison for the clock backstop). ``timer``: the worker's
    other timer, by name, for every request of this run (the worker's own when None)."""

    def __init__(self, buf: WorkloadBuffers, plan: TimingPlan, method: str, check_every: int, empty_every: int = 0,
                 timer: str | None = None):  # fmt: skip
        self.buf, self.plan, self.method = buf, plan, method
        self.check_every, self.empty_every = max(1, check_every), empty_every
        self.which = () if timer is None else (timer,)
        # the sync gap of an empty call under this run's timer (the worker's was measured under its own)
        self.noop_gap_ms = buf.worker.noop_gap_ms if timer is None else None
        self.on_cuda = buf.subject.device.type == "cuda"
        self.n = 0
        self.sampled: set[int] = set()
        self.samples: list[float] = []
        self.walls: list[float] = []
        self.leaks: list[float] = []
        self.late_empty: list[float] = []
        self.host_bound = 0
        self.base_threads = 0
        self.base_children: set[int] = set()

    def warm_up(self) -> None:
        """The warm-up calls, prepared as timed ones; their median cost sets the timed count."""
        buf, plan = self.buf, self.plan
        costs: list[float] = []
        if self.noop_gap_ms is None:
            gaps = [buf.request(("time_noop", *self.which)) for _ in range(5)]
            self.noop_gap_ms = statistics.median(max(0.0, float(r[2]) - float(r[1])) for r in gaps)
        for i in range(max(1, plan.warmup)):
            c0 = time.perf_counter()
            j = i % len(buf.sets)
            buf.refill(j, sub_seed(buf.seed, "warmup", i))
            buf.sync()
            buf.request(("time", j, *self.which))
            costs.append(time.perf_counter() - c0)
            if sum(costs) >= plan.warmup_budget_s():
                break
        self.base_threads = sandbox.thread_count(buf.worker.pid)
        self.base_children = sandbox.descendants(buf.worker.pid)
        # A checked iteration also computes the reference in the judge's process: about one more call.
        self.n = plan.iterations(statistics.median(costs) * (1.0 + 1.0 / self.check_every))
        self.sampled = _sampled(buf.seed, self.n, self.check_every)

    def step(self, i: int) -> None:
        """Timed iteration ``i`` (fresh inputs, the call, its flags, and its check when sampled)."""
        buf, worker = self.buf, self.buf.worker
        if self.empty_every and i % self.empty_every == 0:
            buf.sync()
            p0 = time.perf_counter()
            buf.request(("time_noop", *self.which))
            self.late_empty.append((time.perf_counter() - p0) * 1e3)
        j = i % len(buf.sets)
        buf.refill(j, sub_seed(buf.seed, "timed", i))
        check = buf.prepare_check(j) if i in self.sampled else None
        buf.sync()
        p0 = time.perf_counter()
        reply = buf.request(("time", j, *self.which))
        wall_ms = (time.perf_counter() - p0) * 1e3
        # Copied first, before the slower checks below: work that a thread of the candidate finishes after the
        # reply (a cheat) must not catch up with the check while the judge reads /proc.
        seen = buf.snapshot(j) if check is not None else None
        t_worker, t_all, flags = float(reply[1]), float(reply[2]), list(reply[3])
        _flags_verdict(flags)
        if self.on_cuda:
            # All streams count: the later of the timed stream's end and the device going idle (less the
            # sync gap of an empty call, measured before the subject loaded).
            self.samples.append(max(t_worker, t_all - self.noop_gap_ms))
            self.leaks.append(max(0.0, t_all - t_worker))
            self.host_bound += "host-bound" in flags
        self.walls.append(wall_ms)
        if sandbox.thread_count(worker.pid) > self.base_threads:
            raise RewardHack("the candidate started a thread during the timing phase")
        if sandbox.descendants(worker.pid) - self.base_children:
            raise RewardHack("the candidate started a process during the timing phase")
        if check is not None:
            try:
                buf.check(j, check, seen)
            except WrongNumbers as e:
                judge_timed_failure(buf, j, check, i, e)
            buf.stats.timed_checked += 1

    def empty_ms(self) -> float:
        """The fixed cost of one request with nothing called: the lower quartile of the empty requests
        interleaved with the timed ones (or the median of those measured before the subject was loaded).

        A quartile, not the median: on a busy machine an empty request either takes its fixed cost (~0.2 ms
        on two cores) or is preempted for a time slice (3-7 ms), and a median landing on the second mode,
        subtracted from every call, put millisecond calls at zero."""
        return quantile(self.late_empty, 0.25) if self.late_empty else self.buf.worker.noop_wall_ms

    def result(self, host_overhead_ms: float | None = None) -> TimedPhase:
        """The statistics. On the CPU a sample is the judge's clock less ``host_overhead_ms`` (default: the
        empty requests measured before this subject's code was loaded, which it cannot inflate)."""
        extra = {"host_bound_fraction": self.host_bound / self.n} if self.on_cuda else {}
        clock = sm_clock_mhz(self.buf.subject.device) if self.on_cuda else None
        if not self.on_cuda:
            overhead = self.buf.worker.noop_wall_ms if host_overhead_ms is None else host_overhead_ms
            self.samples = [max(w - overhead, 1e-6) for w in self.walls]
        stats = summarize(self.samples, self.method if self.on_cuda else HOST_METHOD, clock, extra=extra)
        return TimedPhase(stats, self.walls, self.leaks, self.late_empty, self.host_bound, self.noop_gap_ms or 0.0)

