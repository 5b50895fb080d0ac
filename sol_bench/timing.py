"""Timers and timing plans: what the worker times a call with, and how many calls (``TimingPlan``).

The judge, the reference and T_b are all timed through ``sol_bench.timed_phase`` in a worker process;
``time_callable`` is the same per-call recipe in one process, for benches that time trusted code there.

Per iteration: ``before_each`` (untimed: fresh input content, output poisoning), an L2 flush on CUDA, then
the call. On CUDA three events are recorded: ``start`` before the call, ``end`` right after it on the
calling stream, and ``end_all`` after a device-wide synchronize. The reported latency is start→end; the
gap end→end_all exposes work that was pushed onto another stream and finished after the timed stream
(``stream_leak_ms``). On the CPU the clock is ``time.perf_counter``.

Launch pre-roll (CUDA): a spin kernel of about ``LAUNCH_PREROLL_US`` is queued just before ``start``, so the
window opens when the GPU reaches the call rather than when the host begins launching it. Host launch time
up to the pre-roll is left out, as upstream's CUPTI window (first kernel start to last kernel end) leaves
it out; host time beyond it is counted, and such iterations are reported as host-bound. The pre-roll is
short on purpose: it is also the most host work a candidate could hide before the window opens.

The other CUDA timer, ``timer="cupti"`` (``sol_bench.device_window``), is upstream's window itself: first GPU
activity start to last GPU activity end on any stream, no pre-roll, no events in the window.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class TimingStats:
    median_ms: float
    iqr_ms: float
    samples_ms: tuple[float, ...]
    sm_clock_mhz: float | None
    method: str
    stream_leak_ms: float = 0.0  # median gap between the timed stream's end and the device going idle
    extra: dict = field(default_factory=dict)


def quantile(xs: list[float] | tuple[float, ...], q: float) -> float:
    s = sorted(xs)
    if not s:
        raise ValueError("no samples")
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(
    samples: list[float], method: str, sm_clock_mhz: float | None = None, leak: float = 0.0, extra: dict | None = None
) -> TimingStats:
    return TimingStats(
        median_ms=statistics.median(samples),
        iqr_ms=quantile(samples, 0.75) - quantile(samples, 0.25),
        samples_ms=tuple(samples),
        sm_clock_mhz=sm_clock_mhz,
        method=method,
        stream_leak_ms=leak,
        extra=dict(extra or {}),
    )


@dataclass(frozen=True)
class TimingPlan:
    """How many calls one subject (a candidate, the reference, a T_b variant) is timed with.

    As Triton's ``do_bench``: the warm-up calls estimate what one whole iteration costs (preparation, call,
    checks), and the timed count is what fits ``budget_s``, kept between ``min_iterations`` and
    ``max_iterations``. Warm-up stops early once it has used ``warmup_share`` of the budget. Every subject is
    timed with the same plan, so slow workloads get fewer iterations rather than minutes each.
    """

    warmup: int = 10
    min_iterations: int = 5
    max_iterations: int = 50
    budget_s: float = 5.0
    warmup_share: float = 0.2

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError(f"TimingPlan.max_iterations must be at least 1, got {self.max_iterations}")
        if self.min_iterations < 1:
            raise ValueError(f"TimingPlan.min_iterations must be at least 1, got {self.min_iterations}")
        if not self.budget_s > 0:
            raise ValueError(f"TimingPlan.budget_s must be > 0, got {self.budget_s}")

    def warmup_budget_s(self) -> float:
        return self.budget_s * self.warmup_share

    def iterations(self, iteration_cost_s: float) -> int:
        """Timed iterations for an estimated cost per iteration (seconds)."""
        floor = min(self.min_iterations, self.max_iterations)
        if not iteration_cost_s > 0:
            return self.max_iterations
        return max(floor, min(self.max_iterations, int(self.budget_s / iteration_cost_s)))


LAUNCH_PREROLL_US = 20.0


def preroll_cycles(preroll_us: float, probe_cycles: int, probe_ms: float) -> int:
    """Spin cycles for a pre-roll of ``preroll_us``, scaled from a probe spin of ``probe_cycles`` that took
    ``probe_ms`` on the GPU. 0 turns the pre-roll off."""
    if preroll_us <= 0:
        return 0
    if probe_cycles <= 0 or probe_ms <= 0:
        raise ValueError(f"a probe spin of {probe_cycles} cycles in {probe_ms} ms cannot calibrate the pre-roll")
    return max(1, round(probe_cycles * preroll_us / (probe_ms * 1e3)))


def settled_probe_ms(probe: Callable[[], float], keep: int = 3, tolerance: float = 0.03, max_probes: int = 60) -> float:
    """The time of ``probe()`` once the GPU's clock has settled: probes repeat until ``keep`` in a row agree
    within ``tolerance`` (or ``max_probes`` ran), and the fastest of those last ones is returned.

    The pre-roll spins for a number of SM cycles, so its length follows the clock. Calibrated on a GPU still
    at idle clocks (the judge's worker makes its timer right after CUDA starts), it came out several times
    too short at the boost clock the timed calls then ran at."""
    xs: list[float] = []
    for _ in range(max(keep, max_probes)):
        xs.append(probe())
        last = xs[-keep:]
        if len(last) == keep and max(last) <= min(last) * (1 + tolerance):
            break
    return min(xs[-keep:])


PREROLL_KINDS = ("stream", "device")  # one thread spinning on the timed stream | every SM held (device_preroll.py)


def cuda_method(preroll_us: float, preroll_kind: str = "stream") -> str:
    """The timing method recorded in traces and baselines."""
    kind = "" if preroll_kind == "stream" else preroll_kind
    return "cuda_events+device_sync" + (f"+{kind}preroll{preroll_us:g}us" if preroll_us > 0 else "")


class L2Flusher:
    """Evicts the L2 cache by writing a buffer twice its size."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        size = max(int(getattr(props, "L2_cache_size", 0)) * 2, 64 << 20)
        self._buf = torch.empty(size // 4, dtype=torch.int32, device=device)
        self._n = 0

    def flush(self) -> None:
        self._n += 1
        self._buf.fill_(self._n)


def sm_clock_mhz(device: torch.device) -> float | None:
    """Current SM clock of a CUDA device through NVML, or None where NVML is missing."""
    if device.type != "cuda":
        return None
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if ids and all(i.isdigit() for i in ids) and index < len(ids):
            index = int(ids[index])
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except pynvml.NVMLError:
        return None


class CudaTimer:
    """The CUDA timing primitives, taken from torch's C types when the timer is made.

    The candidate's process makes its timer before importing candidate code: patching ``torch.cuda.Event``
    or ``torch.cuda.synchronize`` afterwards does not reach these references.
    """

    def __init__(self, device: torch.device, preroll_us: float = LAUNCH_PREROLL_US, preroll_kind: str = "stream"):
        if preroll_kind not in PREROLL_KINDS:
            raise ValueError(f"unknown pre-roll kind {preroll_kind!r}: choose from {', '.join(PREROLL_KINDS)}")
        base, event = torch._C._CudaEventBase, torch.cuda.Event
        self._record = getattr(base, "record", event.record)
        self._elapsed = getattr(base, "elapsed_time", event.elapsed_time)
        self._wait = getattr(base, "synchronize", event.synchronize)
        self._query = getattr(base, "query", event.query)
        self._device_sync = getattr(torch._C, "_cuda_synchronize", torch.cuda.synchronize)
        self._sleep = torch._C._cuda_sleep  # spins on the current stream for a number of SM cycles
        self.stream = torch.cuda.current_stream(device)
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        self.preroll_us, self.preroll_kind = preroll_us, preroll_kind
        self._spin: Callable[[], object] | None = None
        if preroll_us > 0 and preroll_kind == "device":
            from .device_preroll import DevicePreroll

            self._spin = DevicePreroll(device, self.stream, preroll_us)
        elif preroll_us > 0:
            cycles, sleep = self._calibrate(preroll_us), self._sleep
            self._spin = lambda: sleep(cycles)

    def _calibrate(self, preroll_us: float) -> int:
        if preroll_us <= 0:
            return 0
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        probe = 200_000  # ~0.1 ms at the H200's 1980 MHz, ~0.6 ms at its 345 MHz idle clock

        def spin_ms() -> float:
            self._record(a, self.stream)
            self._sleep(probe)
            self._record(b, self.stream)
            self._wait(b)
            return self._elapsed(a, b)

        self._sleep(40_000_000)  # ~20 ms of load at boost clock: lets an idle GPU's clock come up
        return preroll_cycles(preroll_us, probe, settled_probe_ms(spin_ms))

    def time(self, fn: Callable[[], object]) -> tuple[float, float, tuple[str, ...]]:
        """(start→end on the timed stream, start→device idle) in ms for one call of ``fn``, and its flags:
        "host-bound" when the host was still launching as the pre-roll ran out (the window holds host time)."""
        start, end, end_all = self._events
        if self._spin is not None:
            self._spin()
        self._record(start, self.stream)
        fn()
        self._record(end, self.stream)
        host_bound = self._spin is not None and bool(self._query(start))
        self._device_sync()
        self._record(end_all, self.stream)
        self._wait(end_all)
        return self._elapsed(start, end), self._elapsed(start, end_all), ("host-bound",) if host_bound else ()


TIMERS = ("events", "cupti")  # CUDA events around the call after a pre-roll | upstream's CUPTI device window


def check_timer(timer: str) -> None:
    if timer not in TIMERS:
        raise ValueError(f"unknown timer {timer!r}: choose from {', '.join(TIMERS)}")


def make_cuda_timer(device: torch.device, timer: str = "events", preroll_us: float = LAUNCH_PREROLL_US,
                    preroll_kind: str = "stream"):
    """The CUDA timer of this kind; both have ``time(fn) -> (ms, ms_until_idle, flags)``."""
    check_timer(timer)
    if timer == "cupti":
        from .device_window import DeviceWindowTimer

        return DeviceWindowTimer(device)
    return CudaTimer(device, preroll_us, preroll_kind)


def timing_method(timer: str, preroll_us: float, preroll_kind: str = "stream") -> str:
    """The method name recorded in traces and baselines for a CUDA timer."""
    check_timer(timer)
    if timer == "cupti":
        from .device_window import METHOD

        return METHOD
    return cuda_method(preroll_us, preroll_kind)


def time_callable(
    fn: Callable[[], object],
    device: torch.device | str,
    warmup: int = 10,
    iterations: int = 50,
    flush_l2: bool = True,
    before_each: Callable[[], object] | None = None,
    preroll_us: float = LAUNCH_PREROLL_US,
    preroll_kind: str = "stream",
    timer: str = "events",
) -> TimingStats:
    """Time ``fn()`` in this process with the worker's per-call recipe (benches only: the judge and T_b time
    through ``sol_bench.timed_phase``, in a worker, so their times divide one another fairly)."""
    device = torch.device(device)
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    check_timer(timer)
    if device.type == "cuda":
        flusher = L2Flusher(device) if flush_l2 else None
        clock = make_cuda_timer(device, timer, preroll_us, preroll_kind)
        for _ in range(warmup):
            if before_each:
                before_each()
            fn()
        torch.cuda.synchronize(device)
        samples, leaks, host_bound = [], [], 0
        for _ in range(iterations):
            if before_each:
                before_each()
            if flusher:
                flusher.flush()
            torch.cuda.synchronize(device)
            t, t_all, flags = clock.time(fn)
            bound = "host-bound" in flags
            samples.append(t)
            leaks.append(max(0.0, t_all - t))
            host_bound += bound
        extra = {"host_bound_fraction": host_bound / iterations}
        method = timing_method(timer, preroll_us, preroll_kind)
        return summarize(samples, method, sm_clock_mhz(device), statistics.median(leaks), extra)
    for _ in range(warmup):
        if before_each:
            before_each()
        fn()
    samples = []
    for _ in range(iterations):
        if before_each:
            before_each()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return summarize(samples, "cpu_perf_counter")
