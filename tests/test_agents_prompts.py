"""Pure rendering of the protocol, task and feedback turns."""

from __future__ import annotations

from pathlib import Path

from agents.base import AttemptFeedback, WorkloadFeedback
from agents.prompts import conversation, render_attempt, system_prompt, trim_log
from agents.reply import solution_block
from sol_bench.models import Solution
from sol_bench.problem import load_problem

FIXTURE = Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small"
SOL = Solution.model_validate({
    "name": "s", "definition": "rmsnorm_small",
    "spec": {"languages": ["pytorch"], "entry_point": "k.py::run"},
    "sources": [{"path": "k.py", "content": "def run(x, weight, eps, y):\n    pass\n"}],
})  # fmt: skip


def test_every_language_has_notes_and_protocol_names_the_rules():
    for lang in ("cuda_cpp", "cute_dsl", "triton", "pytorch"):
        text = system_prompt(lang)
        assert "```json" in text and "REWARD_HACK" in text and "L2" in text
    assert "wgmma" in system_prompt("cuda_cpp") and "from_dlpack" in system_prompt("cute_dsl")


def test_trim_compile_log_keeps_errors_only():
    log = "\n".join([f"[{i}/9] building object" for i in range(8)] +
                    ["kernel.cu(3): error: expected a ';'", "  int x", "ninja: build stopped"])  # fmt: skip
    out = trim_log(log, "COMPILE_ERROR")
    assert out.startswith("kernel.cu(3): error: expected a ';'") and "building object" not in out


def test_failures_repeated_across_workloads_are_shown_once():
    ws = tuple(WorkloadFeedback(f"w{i}", "RUNTIME_ERROR", reason="CUDA error: illegal address") for i in range(5))
    text = render_attempt(3, AttemptFeedback("c-9", SOL, ws), parent_id="c-8")
    assert text.count("illegal address") == 1 and "4 more workloads failed the same way" in text
    assert "Attempt 3 (candidate c-9, parent c-8): 0/5 workloads PASSED" in text


def test_long_history_is_summarised_and_bounded():
    problem = load_problem(FIXTURE)
    hist = [AttemptFeedback(f"c{i}", SOL, (WorkloadFeedback("rms-1", "PASSED", latency_ms=1.0, sol_score=0.5),))
            for i in range(10)]  # fmt: skip
    turns = conversation(problem, hist, language="triton", hardware="H200", max_in_full=2)
    assert [t.role for t in turns] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "attempt 8 (c7): 1/1 PASSED, mean SOL score 0.50" in turns[1].content
    assert turns[2].content == solution_block(SOL)
    assert "Make it faster" in turns[-1].content
