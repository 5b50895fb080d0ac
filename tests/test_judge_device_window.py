"""The CUPTI device-window timer: its window arithmetic, and how every entry point takes or refuses it.

The timer itself needs a GPU (BENCHMARKS.md records its runs); here: the window over activity spans, its
refusal on a torch build that cannot trace CUDA, and the `timer` option through config, CLI and baseline.
"""

from __future__ import annotations

import types

import pytest
import torch

from sol_bench.baseline import BaselineConfig
from sol_bench.cli import build_parser
from sol_bench.device_window import METHOD, DeviceWindowTimer, window_ms
from sol_bench.judge import JudgeConfig
from sol_bench.timing import TIMERS, make_cuda_timer, time_callable, timing_method


def test_window_spans_every_stream_from_first_start_to_last_end():
    # two streams: 1.0–3.0 µs and 2.0–7.5 µs; a copy at 0.5–0.8 µs opens the window
    spans = [(1_000, 3_000), (2_000, 7_500), (500, 800)]
    assert window_ms(spans) == pytest.approx(7.0e-3)


def test_gaps_between_activities_stay_in_the_window():
    assert window_ms([(0, 1_000), (51_000, 52_000)]) == pytest.approx(0.052)


def test_no_activity_is_no_window():
    assert window_ms([]) is None


def test_a_span_ending_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="ends before it starts"):
        window_ms([(10, 5)])


@pytest.mark.skipif(
    torch.profiler.ProfilerActivity.CUDA in torch._C._autograd._supported_activities(),
    reason="this torch build can trace CUDA",
)
def test_timer_refuses_a_torch_without_cuda_tracing():
    with pytest.raises(RuntimeError, match="cannot trace CUDA activity"):
        DeviceWindowTimer(torch.device("cpu"))


def test_timer_names_and_methods():
    assert TIMERS == ("events", "cupti")
    assert timing_method("cupti", 20.0) == METHOD
    assert timing_method("events", 20.0) == "cuda_events+device_sync+preroll20us"
    assert timing_method("events", 20.0, "device") == "cuda_events+device_sync+devicepreroll20us"
    with pytest.raises(ValueError, match="unknown timer 'wall'"):
        make_cuda_timer(torch.device("cpu"), "wall")


def test_time_callable_refuses_an_unknown_timer_on_any_device():
    with pytest.raises(ValueError, match="unknown timer"):
        time_callable(lambda: None, "cpu", 0, 1, timer="wall")


def test_cpu_timing_is_untouched_by_the_cuda_timer_choice():
    stats = time_callable(lambda: sum(range(100)), "cpu", 1, 5, timer="cupti")
    assert stats.method == "cpu_perf_counter" and len(stats.samples_ms) == 5


def test_judge_config_validates_the_timer():
    assert JudgeConfig(timer="cupti").timer == "cupti"
    with pytest.raises(ValueError, match="JudgeConfig.timer: 'wall'"):
        JudgeConfig(timer="wall")


def test_eval_cli_takes_the_timer_and_refuses_others(capsys):
    args = build_parser().parse_args(["eval", "p", "--solution", "s.json", "--timer", "cupti"])
    assert args.timer == "cupti"
    assert build_parser().parse_args(["eval", "p", "--solution", "s.json"]).timer == "events"
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["eval", "p", "--solution", "s.json", "--timer", "wall"])
    assert e.value.code == 2 and "invalid choice: 'wall'" in capsys.readouterr().err


def test_baseline_config_carries_the_timer():
    assert BaselineConfig().timer == "events"
    assert BaselineConfig(device="cuda", timer="cupti").timer == "cupti"


class _Recorded(DeviceWindowTimer):
    """The timer's verdict logic over given device records (the CUPTI session itself needs a GPU)."""

    def __init__(self, records):
        self.marker, self._records = "spin_kernel(long)", records

    def _session(self, fn):
        fn()
        return self._records


def test_the_marker_opens_the_session_but_not_the_window():
    t = _Recorded([("spin_kernel(long)", 0, 2_000), ("rms_kernel", 10_000, 14_000), ("memcpy", 15_000, 16_000)])
    assert t.time(lambda: None) == (pytest.approx(0.006), pytest.approx(0.006), ())


def test_a_session_without_the_marker_was_replaced_by_the_call():
    ms, _, flags = _Recorded([("rms_kernel", 10_000, 10_500)]).time(lambda: None)
    assert flags == ("profiler-restarted",) and ms == pytest.approx(0.0005)


def test_a_session_the_call_closed_is_flagged_not_raised():
    assert _Recorded(None).time(lambda: None) == (0.0, 0.0, ("profiler-restarted",))


def test_a_call_with_no_gpu_work_is_flagged():
    assert _Recorded([("spin_kernel(long)", 0, 2_000)]).time(lambda: None) == (0.0, 0.0, ("no-device-activity",))


class _Event:
    def __init__(self, name, device, kind, start, end):
        self._v = (name, device, kind, start, end)

    def name(self):
        return self._v[0]

    def device_type(self):
        return self._v[1]

    def activity_type(self):
        return self._v[2]

    def start_ns(self):
        return self._v[3]

    def duration_ns(self):
        return self._v[4] - self._v[3]


def _timer_over(events=None, disable_error=None):
    """A DeviceWindowTimer whose profiler and CUDA calls are stand-ins: its own session code runs."""
    t = object.__new__(DeviceWindowTimer)
    t._cuda, t._config, t._activities, t.marker = "CUDA", None, None, "spin_kernel(long)"
    t._device_sync = t._sleep = lambda *a: None
    t._prepare = t._enable = lambda *a: None

    def disable():
        if disable_error is not None:
            raise disable_error
        return types.SimpleNamespace(events=lambda: events)

    t._disable = disable
    return t


def test_only_device_work_records_count_in_the_window():
    events = [
        _Event("spin_kernel(long)", "CUDA", 5, 0, 1_000),
        _Event("cudaLaunchKernel", "CPU", 7, 500, 40_000),  # host runtime call
        _Event("Activity Buffer Request", "CUDA", 11, 100, 90_000),  # CUPTI overhead on a device row
        _Event("memcpy DtoD", "CUDA", 3, 3_000, 4_000),
        _Event("rms_kernel", "CUDA", 5, 5_000, 9_000),
    ]
    assert _timer_over(events).time(lambda: None) == (pytest.approx(0.006), pytest.approx(0.006), ())


def test_a_session_the_call_closed_itself_is_flagged():
    t = _timer_over(disable_error=RuntimeError("profiler is not enabled"))
    assert t.time(lambda: None) == (0.0, 0.0, ("profiler-restarted",))


def test_a_failing_call_still_closes_the_session_and_raises():
    closed = []
    t = _timer_over([])
    t._disable = lambda: closed.append(True) or types.SimpleNamespace(events=lambda: [])

    def boom():
        raise ValueError("candidate bug")

    with pytest.raises(ValueError, match="candidate bug"):
        t.time(boom)
    assert closed == [True]
