"""A candidate's own account of what it chose (output lines starting with ``solforge ``, as the offline agent's
tuned and subgraph candidates print one per input signature) lands in the passing trace of the workload where
it was printed, once; the rest of its output does not."""

from __future__ import annotations

from pathlib import Path

from judge_corpus import corpus
from judge_corpus.harness import fast_config
from sol_bench.judge import evaluate
from sol_bench.models import Solution, Status
from sol_bench.problem import load_problem

_KERNEL = """import sys
import torch
_seen = set()
def run(x, weight, eps, y):
    if x.shape not in _seen:
        _seen.add(x.shape)
        print(f"solforge test {tuple(x.shape)}: keeps plain torch", file=sys.stderr, flush=True)
        print("some other chatter", file=sys.stderr, flush=True)
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
"""


def test_the_candidates_told_lines_are_in_the_trace_of_their_workload_once(tmp_path: Path) -> None:
    problem = load_problem(corpus.materialize("rmsnorm_small", tmp_path / "p", first_workloads=2))
    sol = Solution.model_validate({
        "name": "told", "definition": problem.name, "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run"},
        "sources": [{"path": "kernel.py", "content": _KERNEL}],
    })  # fmt: skip
    traces = evaluate(problem, sol, fast_config(tmp_path / "staging"))
    assert [t.evaluation.status for t in traces] == [Status.PASSED, Status.PASSED]
    logs = [t.evaluation.log for t in traces]
    told = [[x for x in log.splitlines() if x.startswith("solforge ")] for log in logs]
    assert told[0][0].startswith("solforge test (1, ") and all("(1, " in x for x in told[0]), logs[0]
    assert told[1] and all("(1, " not in x for x in told[1]), logs[1]  # the first workload's line is not repeated
    assert not any("chatter" in log for log in logs)
