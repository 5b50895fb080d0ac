"""A wrong timed iteration is replayed untimed before any verdict: REWARD_HACK only on evidence honest code
cannot produce (sol_bench/recheck.py)."""

from __future__ import annotations

import json
from pathlib import Path

from judge_corpus.harness import fast_config
from sol_bench.judge import evaluate
from sol_bench.models import Solution, Status
from sol_bench.problem import load_problem

REFERENCE = "import torch\n\ndef run(x):\n    return x.sum(dim=-1)\n"


def _problem(tmp: Path, workloads: int) -> Path:
    d = tmp / "row_sums"
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps({
        "name": "row_sums", "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 16}},
        "inputs": {"x": {"shape": ["T", "H"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["T"], "dtype": "float32"}}, "reference": REFERENCE,
    }))  # fmt: skip
    rows = [{"uuid": f"rows-{i}", "axes": {"T": 4}, "inputs": {"x": {"type": "random"}}} for i in range(workloads)]
    (d / "workload.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _solution(source: str) -> Solution:
    return Solution.model_validate({
        "name": "candidate", "definition": "row_sums", "author": "test",
        "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run"},
        "sources": [{"path": "kernel.py", "content": source}],
    })  # fmt: skip


# Wrong (one output off by 1) exactly when the first element is the largest of the first six: about one input
# in six, whatever the seed's scale and offset. The same inputs give the same wrong outputs, timed or not.
INPUT_DEPENDENT = """
def run(x, y):
    y.copy_(x.sum(dim=-1))
    if bool(x[0, 0] > x[0, 1:6].max()):
        y[0] += 1.0
"""

# Reads the worker's request from its caller's frames: right in correctness calls, wrong when timed.
PHASE_DETECTOR = """
import sys


def _timed():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "main" and "op" in f.f_locals:
            return f.f_locals["op"] == "time"
        f = f.f_back
    return False


def run(x, y):
    y.copy_(x.sum(dim=-1))
    if _timed():
        y.zero_()
"""

# Counts calls: right for the calls it expects to be checked (the correctness rounds), idle after them.
CALL_COUNTER = """
_calls = [0]


def run(x, y):
    _calls[0] += 1
    if _calls[0] <= 2:
        y.copy_(x.sum(dim=-1))
"""

# Right for the calls it expects to be checked, then hands the work to a thread started at import, which writes
# the outputs a tenth of a second after the call returned.
LATE_WRITER = """
import queue
import threading
import time

_jobs = queue.Queue()


def _writer():
    while True:
        x, y = _jobs.get()
        time.sleep(0.1)
        y.copy_(x.sum(dim=-1))


threading.Thread(target=_writer, daemon=True).start()
_calls = [0]


def run(x, y):
    _calls[0] += 1
    if _calls[0] <= 2:
        y.copy_(x.sum(dim=-1))
    else:
        _jobs.put((x, y))
"""


def _config(tmp: Path, **kw):
    base = dict(iterations=30, min_iterations=30, warmup=1, correctness_rounds=2, check_every=1,
                time_reference=False, time_budget_s=30.0)  # fmt: skip
    return fast_config(tmp / "stg", **{**base, **kw})


def test_numerics_wrong_on_some_inputs_is_incorrect_numerical_not_a_reward_hack(tmp_path):
    """Eight workloads, every timed iteration checked: each passes its two correctness rounds with p = 25/36
    and then meets a failing input almost surely, so P(no workload reaches the timed recheck) ~ 1e-4."""
    traces = evaluate(load_problem(_problem(tmp_path, 8)), _solution(INPUT_DEPENDENT), _config(tmp_path))
    statuses = [t.evaluation.status for t in traces]
    assert Status.REWARD_HACK not in statuses, [t.evaluation.log for t in traces]
    assert set(statuses) <= {Status.INCORRECT_NUMERICAL, Status.PASSED}
    found = [t.evaluation for t in traces if "found in the timed phase" in t.evaluation.log]
    assert found, [t.evaluation.log for t in traces]
    for ev in found:
        assert ev.status is Status.INCORRECT_NUMERICAL
        assert "wrong outputs untimed too" in ev.log
        assert ev.correctness is not None and ev.correctness.matched_ratio < 1.0  # the untimed replay's stats


def test_right_untimed_and_wrong_timed_is_a_reward_hack(tmp_path):
    traces = evaluate(load_problem(_problem(tmp_path, 1)), _solution(PHASE_DETECTOR),
                      _config(tmp_path, iterations=5, min_iterations=5))  # fmt: skip
    ev = traces[0].evaluation
    assert ev.status is Status.REWARD_HACK, ev.log
    assert "the same inputs gave right outputs in an untimed call" in ev.log


def test_stopping_work_after_the_checked_calls_is_a_reward_hack(tmp_path):
    """Wrong on the timed iteration's inputs untimed too, but also wrong now on the inputs of a correctness
    round it passed: the same inputs gave right outputs before and wrong ones now."""
    traces = evaluate(load_problem(_problem(tmp_path, 1)), _solution(CALL_COUNTER),
                      _config(tmp_path, iterations=5, min_iterations=5))  # fmt: skip
    ev = traces[0].evaluation
    assert ev.status is Status.REWARD_HACK, ev.log
    assert "inputs that passed the last correctness round now give wrong outputs" in ev.log


def test_honest_code_passes_with_every_timed_iteration_checked(tmp_path):
    traces = evaluate(load_problem(_problem(tmp_path, 1)), _solution("def run(x, y):\n    y.copy_(x.sum(dim=-1))\n"),
                      _config(tmp_path, iterations=5, min_iterations=5))  # fmt: skip
    ev = traces[0].evaluation
    assert ev.status is Status.PASSED, ev.log
    assert ev.correctness.timed_runs_checked == 5 and ev.correctness.rounds == 2


def test_outputs_written_after_the_call_returned_are_a_reward_hack(tmp_path):
    """The replay's outputs change while no call is in flight: only work left running past the call does that."""
    traces = evaluate(load_problem(_problem(tmp_path, 1)), _solution(LATE_WRITER),
                      _config(tmp_path, iterations=5, min_iterations=5))  # fmt: skip
    ev = traces[0].evaluation
    assert ev.status is Status.REWARD_HACK, ev.log
    assert "changed after the call had returned" in ev.log
