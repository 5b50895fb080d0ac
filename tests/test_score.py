"""SOL score formula, its guards, and the aggregates."""

from __future__ import annotations

import math

import pytest

from sol_bench.score import ScoreFlag, aggregate, aggregate_by_problem, sol_score


def test_formula_anchors():
    assert sol_score(2.0, 2.0, 1.0).sol_score == pytest.approx(0.5)
    assert sol_score(1.0, 2.0, 1.0).sol_score == pytest.approx(1.0)
    # T_k = 1.5, T_b = 3, T_SOL = 1: 1 / (1 + 0.5 / 2) = 0.8
    s = sol_score(1.5, 3.0, 1.0, t_eager=6.0)
    assert s.sol_score == pytest.approx(0.8)
    assert s.speedup_vs_baseline == pytest.approx(2.0)
    assert s.speedup_vs_eager == pytest.approx(4.0)
    assert s.flag is ScoreFlag.ok
    # slower than the baseline: below 0.5
    assert sol_score(5.0, 3.0, 1.0).sol_score == pytest.approx(1 / 3)


def test_faster_than_sol_is_flagged_never_rewarded():
    s = sol_score(0.5, 3.0, 1.0)
    assert s.flag is ScoreFlag.faster_than_sol
    assert s.sol_score == 0.0 and s.speedup_vs_baseline is None and not s.rewarded


def test_baseline_at_or_below_sol_guard():
    s = sol_score(2.0, 1.0, 1.0)
    assert s.flag is ScoreFlag.baseline_at_sol
    assert s.sol_score == pytest.approx(0.25)
    assert sol_score(1.0, 0.8, 1.0).sol_score == pytest.approx(0.4)
    assert 0 <= sol_score(1.0, 1.0, 1.0).sol_score <= 1


def test_failed_and_bad_times():
    assert sol_score(None, 2.0, 1.0).flag is ScoreFlag.failed
    with pytest.raises(ValueError):
        sol_score(-1.0, 2.0, 1.0)
    with pytest.raises(ValueError):
        sol_score(1.0, 0.0, 0.0)


def test_aggregate_over_workloads():
    scores = [
        sol_score(1.0, 4.0, 0.5),  # 4x
        sol_score(2.0, 2.0, 0.5),  # 1x, score 0.5
        sol_score(None, 2.0, 0.5),  # failed
        sol_score(0.1, 2.0, 0.5),  # cheat
    ]
    agg = aggregate(scores)
    assert agg.n == 4 and agg.n_rewarded == 2 and agg.n_faster_than_sol == 1
    assert agg.geomean_speedup == pytest.approx(2.0)
    assert agg.fraction_beating_baseline == pytest.approx(0.25)
    assert agg.fraction_over_2x == pytest.approx(0.25)
    s0 = 1 / (1 + 0.5 / 3.5)
    assert agg.mean_sol_score == pytest.approx((s0 + 0.5) / 4)
    assert agg.median_sol_score == pytest.approx(0.25)


def test_aggregate_by_problem():
    agg = aggregate_by_problem(
        {
            "a": [sol_score(1.0, 2.0, 0.5), sol_score(1.0, 8.0, 0.5)],  # geomean 4
            "b": [sol_score(1.0, 0.5, 0.25)],  # 0.5x
            "c": [sol_score(1.0, 2.0, 0.5), sol_score(None, 2.0, 0.5)],  # unsolved
        }
    )
    assert agg.n == 3 and agg.n_rewarded == 2
    assert agg.geomean_speedup == pytest.approx(math.sqrt(4 * 0.5))
    assert agg.fraction_beating_baseline == pytest.approx(1 / 3)
    assert agg.fraction_over_2x == pytest.approx(1 / 3)
    assert aggregate([]).mean_sol_score is None
