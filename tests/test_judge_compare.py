"""The judge's comparison of outputs with the reference's (tolerances, matched ratios, NaN and Inf, shapes and
dtypes) and its clock checks against speed-of-light and the empty call."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import pytest
import torch

from sol_bench.correctness import compare
from sol_bench import judge
from sol_bench.errors import RewardHack, WrongDtype, WrongNumbers, WrongShape
from sol_bench.judge import below_sol_on_host_clock, clock_disagreement
from sol_bench.models import Tolerance
from sol_bench.timed_phase import TimedPhase, TimedRun
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


def _timed(window_ms: float, walls_ms: list[float], empty_ms: list[float], leak_ms: float = 0.0,
           gap_ms: float = 0.0) -> TimedPhase:  # fmt: skip
    n = len(walls_ms)
    return TimedPhase(summarize([window_ms] * n, "m"), walls_ms, [leak_ms] * n, empty_ms, 0, gap_ms)


def test_a_device_window_the_clock_disputes_is_retimed_under_the_event_timer_not_called_a_cheat(monkeypatch):
    # The H100 case (2026-12-06): honest candidates (graph replays) read 0.07-0.14 ms in upstream's device window and
    # 1.3-1.9 ms more on the judge's clock, which also holds the profiler's handling of every kernel record, and the
    # clock backstop called them REWARD_HACK. Under that window the call is re-timed under the event timer and
    # charged that; where the clock disputes the event timer too, it is a forged report.
    monkeypatch.setattr(judge, "sol_floor", lambda *a: (None, None, ""))
    worker = SimpleNamespace(noop_gap_ms=0.0, noop_wall_ms=3.7)
    walls, empties = [5.05, 5.06, 5.07], [3.74, 3.75]
    retimes = []

    def retime(window_ms, walls_ms, empty_ms):
        def again():
            retimes.append(window_ms)
            return _timed(window_ms, walls_ms, empty_ms)
        return again

    honest = retime(0.095, [0.51, 0.52, 0.53], [0.40])
    stats, t_sol, _, note = judge._plausible(_cuda_context("cupti"), None, worker, _timed(0.0693, walls, empties),
                                             honest)  # fmt: skip
    assert stats.median_ms == pytest.approx(0.095) and t_sol is None and retimes == [0.095]
    assert "re-timed under the event timer, 0.0950 ms" in note and "0.0693 ms" in note
    forged = retime(0.0693, walls, empties)
    with pytest.raises(RewardHack, match="timer tampering.*re-timed under the event timer"):
        judge._plausible(_cuda_context("cupti"), None, worker, _timed(0.0693, walls, empties), forged)
    with pytest.raises(RewardHack, match="timer tampering"):  # under the event timer itself: no second chance
        judge._plausible(_cuda_context("events"), None, worker, _timed(0.0693, walls, empties), honest)
    assert retimes == [0.095, 0.0693]
    # a window the clock agrees with is the call's time, under either timer, and nothing is re-timed
    for timer in ("cupti", "events"):
        stats, _, _, note = judge._plausible(_cuda_context(timer), None, worker, _timed(0.0693, [3.80, 3.85], empties),
                                             honest)  # fmt: skip
        assert stats.median_ms == pytest.approx(0.0693) and note == ""
    assert retimes == [0.095, 0.0693]


def test_a_retimed_call_is_checked_for_side_streams_against_the_event_timers_own_sync_gap(monkeypatch):
    # The re-time runs under the event timer, whose empty call syncs with its own gap (not the CUPTI timer's):
    # device idle 0.3 ms after the stream's end is that gap on an empty call, not work hidden on a side stream.
    monkeypatch.setattr(judge, "sol_floor", lambda *a: (None, None, ""))
    worker = SimpleNamespace(noop_gap_ms=0.0, noop_wall_ms=3.7)
    disputed = _timed(0.0693, [5.05, 5.06, 5.07], [3.74, 3.75])
    honest = _timed(0.095, [0.51, 0.52, 0.53], [0.40], leak_ms=0.30, gap_ms=0.28)
    stats, *_ = judge._plausible(_cuda_context("cupti"), None, worker, disputed, lambda: honest)
    assert stats.median_ms == pytest.approx(0.095)
    hidden = _timed(0.095, [0.51, 0.52, 0.53], [0.40], leak_ms=0.60, gap_ms=0.28)
    with pytest.raises(RewardHack, match="side stream"):
        judge._plausible(_cuda_context("cupti"), None, worker, disputed, lambda: hidden)


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


_DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device")])]


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("n", [41984, 6936])
def test_exact_outputs_match_wholly_at_sizes_where_a_reciprocal_mean_falls_short(n, device):
    # A CUDA mean is the sum times fl(1/N); at these N (a MoE dispatch's 8 x 5248 rows, its 867 x 8 token
    # indices) that product is one rounding step under 1.0, and outputs equal bit for bit read "100.0000%
    # within ... (need 100.00%)" and failed, the eager reference against itself included.
    one = torch.tensor(1.0, dtype=torch.float32)
    assert float(torch.tensor(float(n)) * (one / n)) < 1.0
    ref = torch.arange(n, dtype=torch.int64, device=device)
    exact = tol(max_atol=0.0, max_rtol=0.0, required_matched_ratio=1.0)
    assert compare("token_index", ref.clone(), ref, exact).matched_ratio == 1.0
    out = ref.clone()
    out[-1] += 1
    with pytest.raises(WrongNumbers) as e:
        compare("token_index", out, ref, exact)
    assert e.value.stats.matched_ratio == (n - 1) / n


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


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_compare_in_chunks_reads_as_the_whole_comparison(chunk):
    """Statistics and verdicts add up over chunks exactly: each failure mode lands in some chunk, not the first."""
    torch.manual_seed(5)
    r = torch.randn(9, 23)
    cases = {"close": r + 1e-4, "far in the last chunk": r.clone(), "nan late": r.clone(), "-inf both": r.clone(),
             "zeros": torch.zeros_like(r), "inf in the reference": r.clone()}
    cases["far in the last chunk"].view(-1)[-3:] += 5.0
    cases["nan late"].view(-1)[-1] = float("nan")
    cases["-inf both"].view(-1)[100] = float("-inf")
    ref_inf = r.clone()
    ref_inf.view(-1)[150] = float("inf")

    def verdict(o, ref, t, c):
        try:
            return ("passed", compare("y", o, ref, t, chunk=c))
        except WrongNumbers as e:
            return (str(e), e.stats)

    for name, o in cases.items():
        ref = r.clone()
        if name == "-inf both":
            ref.view(-1)[100] = float("-inf")
        if name == "inf in the reference":
            ref = ref_inf
        for t in (tol(), tol(allow_negative_inf=True), tol(max_atol=0.0, max_rtol=0.0, required_matched_ratio=1.0)):
            assert verdict(o, ref, t, chunk) == verdict(o, ref, t, o.numel()), (name, t)
    whole = verdict(cases["far in the last chunk"], r, tol(required_matched_ratio=1.0), 207)
    assert "within" in whole[0] and whole[1].max_absolute_error == pytest.approx(5.0, rel=1e-6)


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


def test_a_timed_run_under_the_workers_other_timer_names_it_in_every_request_and_measures_its_own_sync_gap():
    sent = []

    def request(msg):
        sent.append(msg)
        return ("timed", 0.010, 0.013, []) if msg[0] == "time_noop" else ("timed", 0.5, 0.504, [])

    worker = SimpleNamespace(pid=os.getpid(), noop_gap_ms=0.0, noop_wall_ms=1.0)
    buf = SimpleNamespace(worker=worker, subject=SimpleNamespace(device=torch.device("cuda")), sets=[0, 1], seed=1,
                          refill=lambda j, seed: None, sync=lambda: None, request=request,
                          prepare_check=lambda j: None, snapshot=lambda j: None)  # fmt: skip
    plan = SimpleNamespace(warmup=2, iterations=lambda cost: 4, warmup_budget_s=lambda: 60.0)
    run = TimedRun(buf, plan, "events", check_every=10**6, empty_every=4, timer="events")
    run.warm_up()
    run.sampled = set()  # no output checks: this fake holds no outputs
    for i in range(run.n):
        run.step(i)
    assert sent and all(m[-1] == "events" for m in sent)
    assert [m[0] for m in sent[:5]] == ["time_noop"] * 5 and run.noop_gap_ms == pytest.approx(0.003)
    assert run.samples == [pytest.approx(0.501)] * 4  # the all-streams time less this timer's own sync gap
    own = TimedRun(buf, plan, "cupti", check_every=10**6, empty_every=4)
    sent.clear()
    own.warm_up()
    assert sent and all(len(m) == 2 and m[0] == "time" for m in sent)  # the worker's own timer: nothing named
