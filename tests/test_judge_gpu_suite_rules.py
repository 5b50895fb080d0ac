"""The GPU suite's rule for cheats that PASS: they must have been timed honestly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _suite():
    spec = importlib.util.spec_from_file_location("judge_gpu_suite", ROOT / "bench" / "judge_gpu_suite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _result(suite, label, statuses, latency, if_passed=None):
    case = suite.Case(label, "p", Path("x.json"), {"*": "REWARD_HACK"}, ["PASSED"], ["pytorch"], if_passed or {})
    return suite.Result(case, statuses=statuses, latency_ms=latency)


def test_a_passing_cheat_with_an_honest_latency_holds_and_a_fast_one_fails():
    suite = _suite()
    honest = _result(suite, "gpu/honest", {"w": "PASSED"}, {"w": 1.0})
    slow = _result(suite, "gpu/cheat_a", {"w": "PASSED"}, {"w": 0.9},
                   {"at_least_fraction_of": "gpu/honest", "fraction": 0.5})  # fmt: skip
    fast = _result(suite, "gpu/cheat_b", {"w": "PASSED"}, {"w": 0.1},
                   {"at_least_fraction_of": "gpu/honest", "fraction": 0.5})  # fmt: skip
    caught = _result(suite, "gpu/cheat_c", {"w": "REWARD_HACK"}, {}, {"at_least_ms": 5.0})
    floor = _result(suite, "gpu/cheat_d", {"w": "PASSED"}, {"w": 0.4}, {"at_least_ms": 1.0})
    suite.check_honest_timing([honest, slow, fast, caught, floor])
    assert slow.ok and caught.ok and honest.ok
    assert not fast.ok and "rewarded" in fast.error
    assert not floor.ok and "rewarded" in floor.error


def test_a_missing_honest_case_is_an_error_not_a_pass():
    suite = _suite()
    lone = _result(suite, "gpu/cheat", {"w": "PASSED"}, {"w": 1.0}, {"at_least_fraction_of": "gpu/absent"})
    suite.check_honest_timing([lone])
    assert not lone.ok and "did not run" in lone.error


def test_selecting_a_conditional_cheat_brings_its_honest_case_along():
    # `--only side_stream` once ran the cheat without gpu/rmsnorm_wide_pytorch, so its PASSED could
    # not be judged; the selection now adds the case it is compared with, in the suite's order
    suite = _suite()

    def case(label, if_passed=None):
        return suite.Case(label, "p", Path("x.json"), {"*": "PASSED"}, [], ["pytorch"], if_passed or {})

    cases = [case("gpu/honest"), case("gpu/other"), case("gpu/side", {"at_least_fraction_of": "gpu/honest"}),
             case("gpu/floor_only", {"at_least_ms": 1.0})]  # fmt: skip
    assert [c.label for c in suite.select(cases, ["side"])] == ["gpu/honest", "gpu/side"]
    assert [c.label for c in suite.select(cases, ["floor_only"])] == ["gpu/floor_only"]
    assert [c.label for c in suite.select(cases, ["other", "side"])] == ["gpu/honest", "gpu/other", "gpu/side"]
