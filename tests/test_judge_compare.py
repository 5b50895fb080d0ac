"""The judge's comparison of outputs with the reference's (tolerances, matched ratios, NaN and Inf, shapes and
dtypes) and its clock checks against speed-of-light and the empty call."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from sol_bench.correctness import compare
from sol_bench import judge
from sol_bench.errors import RewardHack, WrongDtype, WrongNumbers, WrongShape
from sol_bench.judge import below_sol_on_host_clock, clock_disagreement
from sol_bench.models import Tolerance
from sol_bench.timed_phase import TimedPhase
from sol_bench.timing import summarize


def tol(**kw) -> Tolerance:
    return Tolerance(**kw)


def test_host_clock_sol_check_ignores_bounds_inside_the_clock_noise():
    # The CI case: a tiny softmax whose timed calls ran faster than the empty calls measured at load (the
    # noop-subtracted median floored to 1e-6 ms) against a T_SOL of nanoseconds. Nothing is proven.
    assert not below_sol_on_host_clock(upper_ms=-0.004, noise_ms=0.012, bound_ms=0.95 * 4e-6)
    assert not below_sol_on_host_clock(upper_ms=0.0, noise_ms=0.012, bound_ms=0.011)
    # A bound well above the clock's noise still catches a call that returned without doing the work...
    assert below_sol_on_host_clock(upper_ms=0.003, noise_ms=0.012, bound_ms=0.25 * 2.0)
    assert below_sol_on_host_clock(upper_ms=-0.001, noise_ms=0.012, bound_ms=0.5)
    # ...and leaves an honest one that takes longer than the bound alone.
    assert not below_sol_on_host_clock(upper_ms=0.6, noise_ms=0.012, bound_ms=0.5)


def test_clock_backstop_compares_with_the_empty_call_it_is_given():
    # The H200 false alarm (2026-12-01, CUPTI window): a 3 µs RoPE kernel whose timed requests took 1.05 ms
    # more than the empty requests measured before load. Against empty requests timed beside them (the same
    # profiler-session cost) the same calls pass; a call that hides milliseconds of work still fails.
    why = clock_disagreement(0.0030, call_wall_ms=2.40, empty_wall_ms=1.35)
    assert why is not None and "1.0500 ms more" in why and "timer tampering" in why
    assert clock_disagreement(0.0030, call_wall_ms=2.40, empty_wall_ms=2.30) is None
    assert clock_disagreement(0.0030, call_wall_ms=12.40, empty_wall_ms=2.30) is not None
    # the slack grows with the reported time: a 2 ms kernel may take 6 ms more on the clock, not 8
    assert clock_disagreement(2.0, call_wall_ms=7.5, empty_wall_ms=0.5) is None
    assert clock_disagreement(2.0, call_wall_ms=8.5, empty_wall_ms=0.5) is not None


def _cuda_context(timer: str) -> SimpleNamespace:
    config = SimpleNamespace(timer=timer, hardware="h200", sol_margin=0.95, measured_sol_margin=0.9)
    return SimpleNamespace(config=config, device=torch.device("cuda"), problem=SimpleNamespace(definition=None))


def _timed(window_ms: float, walls_ms: list[float], empty_ms: list[float]) -> TimedPhase:
    return TimedPhase(summarize([window_ms] * len(walls_ms), "m"), walls_ms, [0.0] * len(walls_ms), empty_ms, 0)


def test_host_time_outside_the_device_window_is_charged_not_called_a_cheat(monkeypatch):
    # The H100 case (2026-12-06): honest candidates (graph replays) read 0.07-0.14 ms in upstream's device window and
    # 1.3-1.9 ms more on the judge's clock, and the clock backstop called them REWARD_HACK. That window leaves such host time out by design, so under it the call is
    # charged what the judge's clock saw; under the event timer, which counts host time, it is still a forged report.
    monkeypatch.setattr(judge, "sol_floor", lambda *a: (None, None, ""))
    worker = SimpleNamespace(noop_gap_ms=0.0, noop_wall_ms=3.7)
    walls, empties = [5.05, 5.06, 5.07], [3.74, 3.75]
    stats, t_sol, _, note = judge._plausible(_cuda_context("cupti"), None, worker, _timed(0.0693, walls, empties))
    assert stats.median_ms == pytest.approx(5.06 - 3.745) and len(stats.samples_ms) == 3 and t_sol is None
    assert "charged the judge's clock" in note and "0.0693 ms" in note
    with pytest.raises(RewardHack, match="timer tampering"):
        judge._plausible(_cuda_context("events"), None, worker, _timed(0.0693, walls, empties))
    # a window the clock agrees with is the call's time, under either timer
    for timer in ("cupti", "events"):
        stats, _, _, note = judge._plausible(_cuda_context(timer), None, worker, _timed(0.0693, [3.80, 3.85], empties))
        assert stats.median_ms == pytest.approx(0.0693) and note == ""


def test_compare_atol_rtol_bounds():
    ref = torch.tensor([0.0, 1.0, 10.0, -100.0])
    t = tol(max_atol=0.01, max_rtol=0.1, required_matched_ratio=1.0)
    just_in = ref + torch.tensor([0.0099, 0.109, 1.0, -10.0]) * torch.tensor([1, 1, 0.999, 0.999])
    c = compare("y", just_in, ref, t)
    assert c.matched_ratio == 1.0 and c.max_absolute_error == pytest.approx(9.99, rel=1e-5)
    with pytest.raises(WrongNumbers):
        compare("y", ref + torch.tensor([0.0, 0.0, 1.02, 0.0]), ref, t)  # 1.02 > 0.01 + 0.1 * 10
    with pytest.raises(WrongNumbers):
        compare("y", ref + torch.tensor([0.011, 0.0, 0.0, 0.0]), ref, t)  # ref 0: only atol


def test_compare_matched_ratio_threshold():
    ref = torch.ones(100)
    out = ref.clone()
    out[:1] += 5  # 99 % matched
    assert compare("y", out, ref, tol(required_matched_ratio=0.99)).matched_ratio == pytest.approx(0.99)
    out[:2] += 5  # 98 %
    with pytest.raises(WrongNumbers) as e:
        compare("y", out, ref, tol(required_matched_ratio=0.99))
    assert e.value.stats.matched_ratio == pytest.approx(0.98)


def test_compare_error_cap_applies_even_when_the_ratio_is_met():
    ref = torch.ones(1000)
    out = ref.clone()
    out[0] = 50.0  # 99.9 % matched, but one element far off
    assert compare("y", out, ref, tol()).max_absolute_error == pytest.approx(49.0)
    with pytest.raises(WrongNumbers, match="cap"):
        compare("y", out, ref, tol(max_error_cap=1.0))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_compare_nan_and_inf_fail_even_within_ratio(bad):
    ref = torch.ones(1000)
    out = ref.clone()
    out[3] = bad
    with pytest.raises(WrongNumbers) as e:
        compare("y", out, ref, tol(required_matched_ratio=0.5))
    assert e.value.stats.has_nan == math.isnan(bad)
    assert e.value.stats.has_inf == math.isinf(bad)


def test_compare_negative_inf_matched_only_when_allowed():
    ref = torch.tensor([1.0, float("-inf"), 2.0])
    out = ref.clone()
    assert compare("y", out, ref, tol(allow_negative_inf=True, required_matched_ratio=1.0)).matched_ratio == 1.0
    with pytest.raises(WrongNumbers):
        compare("y", out, ref, tol(allow_negative_inf=False, required_matched_ratio=0.5))
    pos = torch.tensor([1.0, float("inf"), 2.0])
    with pytest.raises(WrongNumbers):  # +inf is never matched
        compare("y", pos, pos.clone(), tol(allow_negative_inf=True, required_matched_ratio=0.5))
    with pytest.raises(WrongNumbers):  # -inf where the reference is finite
        compare("y", torch.tensor([1.0, float("-inf"), 2.0]), torch.tensor([1.0, 5.0, 2.0]),
                tol(allow_negative_inf=True, required_matched_ratio=0.5))  # fmt: skip


def test_compare_all_zero_output_against_nonzero_reference_fails():
    ref = torch.full((64,), 1e-3)  # every zero would be within atol
    with pytest.raises(WrongNumbers, match="zero"):
        compare("y", torch.zeros(64), ref, tol())
    assert compare("y", torch.zeros(64), torch.zeros(64), tol()).matched_ratio == 1.0


def test_compare_shape_and_dtype_errors():
    with pytest.raises(WrongShape):
        compare("y", torch.zeros(2, 3), torch.zeros(3, 2), tol())
    with pytest.raises(WrongDtype):
        compare("y", torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.float32), tol())


def test_compare_low_precision_dtypes():
    ref = torch.randn(256).to(torch.bfloat16)
    assert compare("y", ref.clone(), ref, tol(required_matched_ratio=1.0)).max_absolute_error == 0.0
    f8 = torch.randn(256).clamp(-100, 100).to(torch.float8_e4m3fn)
    assert compare("y", f8.clone(), f8, tol(required_matched_ratio=1.0)).matched_ratio == 1.0
