"""The campaign's rolling window (flows/schedule.py): no round barrier, attempts of a problem sequential."""

from __future__ import annotations

from flows.schedule import Window


def test_first_call_plans_then_fills_every_slot_from_idle_problems():
    w = Window(size=3)
    assert w.should_plan()
    w.new_plan({"a": 2, "b": 1, "c": 1, "d": 1})
    picked = []
    while w.has_room() and (p := w.next_problem()):
        w.submitted(p)
        picked.append(p)
    assert picked == ["a", "b", "c"]  # most budget first, one attempt per problem while idle ones have budget


def test_a_verdict_frees_a_slot_at_once_without_waiting_for_the_rest():
    w = Window(size=2)
    w.new_plan({"a": 1, "b": 1, "c": 1})
    w.submitted(w.next_problem())  # a
    w.submitted(w.next_problem())  # b
    assert not w.has_room()
    w.judged("a")  # b still in flight: no barrier
    assert w.has_room() and not w.should_plan() and w.next_problem() == "c"


def test_plans_again_when_no_idle_problem_has_budget_and_a_verdict_came():
    w = Window(size=3)
    w.new_plan({"a": 3, "b": 1})
    w.submitted("a")
    w.submitted("b")
    assert not w.should_plan()  # nothing judged since the plan: the stats would be the same
    assert w.next_problem() == "a"  # chained behind a's attempt in flight
    w.submitted("a")
    assert w.next_problem() is None  # at most 2 of one problem in flight
    w.judged("b")
    assert w.should_plan()  # only a (in flight) has budget: re-plan rather than drain
    assert w.judged_since_plan == {"b": 1}
    w.new_plan({"a": 1, "b": 2})
    assert w.judged_since_plan == {} and w.next_problem() == "b"


def test_exhausted_problems_get_nothing():
    w = Window(size=2)
    w.exhausted.add("a")
    w.new_plan({"a": 3, "b": 1})
    assert w.budget == {"b": 1} and w.next_problem() == "b"
    w.submitted("b")
    assert w.next_problem() is None
