"""Choosing how a family op runs a call shape (``agents/offline/subgraph/families/measure.py``): the fastest way that
agrees with the default, measured once per shape outside a capture; a way that reads on the host only where nothing
else agrees."""

from __future__ import annotations

import torch


def test_a_family_op_keeps_the_fastest_way_that_agrees_with_the_default_and_measures_once():
    from agents.offline.subgraph.families.measure import DEFAULT, fastest

    x = torch.arange(6.0).reshape(2, 3)
    calls = []

    def returns(value, name):
        def call():
            calls.append(name)
            return value
        return call

    def refuses():
        calls.append("refuses")
        raise RuntimeError("No available kernel")

    speed = {DEFAULT: 2.0, "close": 1.0, "wrong": 0.1, "slow": 3.0}
    tries = {DEFAULT: returns(x, DEFAULT), "close": returns(x + 1e-3, "close"), "wrong": returns(x + 1, "wrong"),
             "refuses": refuses, "slow": returns(x, "slow")}  # fmt: skip
    memo: dict = {}
    timed = []

    def time_ms(call):
        name = calls[-1]
        timed.append(name)
        return speed[name]

    assert fastest("shape", tries, time_ms, memo) == "close"
    assert sorted(timed) == sorted([DEFAULT, "close", "slow"])  # neither the refusing nor the disagreeing one
    n = len(calls)
    assert fastest("shape", tries, time_ms, memo) == "close" and len(calls) == n  # remembered, nothing run
    speed |= {"close": 2.0, "slow": 2.0}
    assert fastest("other shape", tries, time_ms, memo) == DEFAULT  # a tie keeps SDPA's own choice


def test_a_way_that_reads_on_the_host_runs_only_where_no_capturable_way_agrees():
    """Timed alone, a way that syncs with the host (torch's fp16 grouped-GEMM fallback) may read fastest, but no
    CUDA graph holds it: a capturable way that agrees is kept instead, however much slower alone."""
    from agents.offline.subgraph.families.measure import DEFAULT, fastest

    x = torch.ones(3)
    speed = {DEFAULT: 1.0, "kernel": 5.0, "other": 4.0}
    last = []

    def way(name, value):
        return lambda: (last.append(name), value)[1]

    def time_ms(call):
        call()
        return speed[last[-1]]

    tries = {DEFAULT: way(DEFAULT, x), "kernel": way("kernel", x), "other": way("other", x + 1)}
    assert fastest("a", tries, time_ms, {}) == DEFAULT  # with no syncing way named, the fastest
    assert fastest("a", tries, time_ms, {}, syncs=frozenset({DEFAULT})) == "kernel"  # "other" disagrees
    only = {DEFAULT: way(DEFAULT, x), "kernel": way("kernel", x + 1)}
    assert fastest("b", only, time_ms, {}, syncs=frozenset({DEFAULT})) == DEFAULT  # nothing else agrees


def test_a_capture_runs_the_default_until_the_shape_was_measured_outside_one(monkeypatch, capsys):
    from agents.offline.subgraph.families import measure

    measured = []
    def fastest(key, ways, time_ms, memo, syncs, times):
        measured.append(key)
        times.update({measure.DEFAULT: 0.25, "kernel": 0.125})
        return memo.setdefault(key, "kernel")

    monkeypatch.setattr(measure, "fastest", fastest)
    ways = {measure.DEFAULT: lambda: 0, "kernel": lambda: 1}
    memo: dict = {}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert measure.chosen_way("shape", ways, memo) == measure.DEFAULT and not measured and not memo  # nothing timed
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert measure.chosen_way("shape", ways, memo) == "kernel" and measured == ["shape"]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert measure.chosen_way("shape", ways, memo) == "kernel" and measured == ["shape"]  # kept, measured once
    # the one measurement is told once, for the judge to put in the trace
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("solforge way")]
    assert said == ["solforge way shape: keeps kernel; default 0.2500 ms; kernel 0.1250 ms"]
    assert measure.told("index_add_rows", ("x" * 500,), "default", {}).startswith("solforge way index_add_rows (")
    assert len(measure.told("op", ("x" * 500,), "default", {"default": 1.0})) <= 300
