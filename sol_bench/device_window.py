"""Upstream's timing window: first GPU activity start to last GPU activity end, on any stream, from CUPTI.

SOL-ExecBench times a call from the start of its first kernel to the end of its last one, over every stream,
as CUPTI records them. This timer does the same through torch's Kineto binding: the profiler runs around one
call with only CUDA activity enabled, the device is synchronised inside it, and every device-side record
(kernels, copies, sets) counts. Host time before the first activity is left out without a pre-roll, so a
candidate cannot hide GPU work beside one; host time between activities is in the window.

The primitives are taken from torch's C bindings when the timer is made, before candidate code loads, as
``CudaTimer`` does. What the candidate can still do in its own process (stop the profiler and start another
inside its call) the judge's wall clock and the speed-of-light bound are there for.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

METHOD = "cupti_device_window"
# libkineto's ActivityType values of work on the device (GPU_MEMCPY, GPU_MEMSET, CONCURRENT_KERNEL): stable
# across its releases. Annotations and CUPTI's overhead records may also carry a CUDA device type.
DEVICE_WORK = frozenset({3, 4, 5})


def window_ms(spans_ns: Iterable[tuple[int, int]]) -> float | None:
    """Milliseconds from the earliest start to the latest end of (start_ns, end_ns) spans; None if none."""
    starts, ends = [], []
    for s, e in spans_ns:
        if e < s:
            raise ValueError(f"an activity ends before it starts: {s} > {e}")
        starts.append(s)
        ends.append(e)
    if not starts:
        return None
    return (max(ends) - min(starts)) / 1e6


def _profiler_config():
    from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

    base = (ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
    try:
        return ProfilerConfig(*base, "")  # torch releases with a trace id
    except TypeError:
        return ProfilerConfig(*base)


class DeviceWindowTimer:
    """``time(fn) -> (window ms, window ms, flags)``, the shape of ``CudaTimer.time``.

    Flags: "no-device-activity" when the call put nothing on the GPU; "profiler-restarted" when the marker
    kernel launched as the session opened is missing from its records (the session was stopped or replaced
    inside the call). The marker runs before the call and is not in the window.
    """

    def __init__(self, device: torch.device):
        from torch._C._autograd import DeviceType, _disable_profiler, _enable_profiler, _prepare_profiler
        from torch._C._profiler import ProfilerActivity

        if ProfilerActivity.CUDA not in torch._C._autograd._supported_activities():
            raise RuntimeError("this torch build cannot trace CUDA activity (no CUPTI): use the event timer")
        self._cuda = DeviceType.CUDA
        self._config = _profiler_config()
        self._activities = {ProfilerActivity.CUDA}
        self._prepare, self._enable, self._disable = _prepare_profiler, _enable_profiler, _disable_profiler
        self._device_sync = getattr(torch._C, "_cuda_synchronize", torch.cuda.synchronize)
        self._sleep = torch._C._cuda_sleep
        self.device = device
        # CUPTI's first session is slow to start. The empty sessions learn the marker's record name, and the
        # probe proves records arrive, before any candidate code could be blamed for their absence.
        for _ in range(2):
            marks = self._session(lambda: None) or []
        if len(marks) != 1:
            raise RuntimeError(f"the CUDA profiler recorded {len(marks)} activities for one marker kernel: use the event timer")
        self.marker = marks[0][0]
        probe = torch.empty(1 << 16, dtype=torch.float32, device=device)
        ms, _, flags = self.time(lambda: probe.add_(1.0))
        if flags or ms <= 0:
            raise RuntimeError(f"the CUDA profiler did not record a probe kernel ({flags or 'empty window'}): use the event timer")

    def _session(self, fn: Callable[[], object]) -> list[tuple[str, int, int]] | None:
        """Device records of one call, or None when no session was left to close (the call closed it)."""
        self._device_sync()
        self._prepare(self._config, self._activities)
        self._enable(self._config, self._activities)
        try:
            self._sleep(1)  # the marker
            fn()
            self._device_sync()
        finally:
            try:
                result = self._disable()
            except RuntimeError:
                result = None
        if result is None:
            return None
        cuda = self._cuda
        return [(e.name(), e.start_ns(), e.start_ns() + e.duration_ns()) for e in result.events()
                if e.device_type() == cuda and (not hasattr(e, "activity_type") or e.activity_type() in DEVICE_WORK)]

    def time(self, fn: Callable[[], object]) -> tuple[float, float, tuple[str, ...]]:
        records = self._session(fn)
        if records is None:
            return 0.0, 0.0, ("profiler-restarted",)
        marked = [r for r in records if r[0] == self.marker]
        ms = window_ms((s, e) for name, s, e in records if name != self.marker)
        flags = () if marked else ("profiler-restarted",)
        if ms is None:
            return 0.0, 0.0, flags + ("no-device-activity",)
        return ms, ms, flags
