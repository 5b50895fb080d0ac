"""The LLM worker end to end against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.base import AttemptFeedback, BudgetExhausted, ProposalFailed, WorkloadFeedback
from agents.budget import AgentBudget, BudgetMeter
from agents.llm import LLMAgent
from agents.llm_client import LLMConfig
from sol_bench.models import Solution
from sol_bench.problem import load_problem

FIXTURE = Path(__file__).parent / "fixtures" / "problems" / "rmsnorm_small"

PYTORCH_RMSNORM = """import torch

def run(x, weight, eps, y):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    torch.mul(xf * rstd, weight.float(), out=y) if y.dtype == torch.float32 else y.copy_(xf * rstd * weight.float())
"""

TRITON_RMSNORM = """import torch
import triton
import triton.language as tl

@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + cols, (x * r * w).to(y_ptr.dtype.element_ty), mask=m)

def run(x, weight, eps, y):
    n = x.shape[-1]
    _rms[(x.numel() // n,)](x, weight, y, n, eps, BLOCK=triton.next_power_of_2(n))
"""


def reply_with(source: str, language: str, name: str = "cand", description: str = "first try") -> str:
    sol = {
        "name": name,
        "definition": "whatever-the-model-wrote",
        "description": description,
        "spec": {"languages": [language], "entry_point": "kernel.py::run", "destination_passing_style": True},
        "sources": [{"path": "kernel.py", "content": source}],
    }
    return "Plan: one program per row, fp32 accumulation.\n\n```json\n" + json.dumps(sol, indent=1) + "\n```\n"


class Script:
    """Replies the server gives, in order: ('ok', text) | ('status', code) | ('slow', seconds, text)."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def next(self, body: dict):
        with self.lock:
            self.requests.append(body)
            return self.steps.pop(0)


def _handler(script: Script):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # keep pytest output clean
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            step = script.next(body)
            if step[0] == "status":
                payload = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}}).encode()
                self.send_response(step[1])
                self.send_header("Retry-After", "0")
            else:
                if step[0] == "slow":
                    time.sleep(step[1])
                text = step[-1]
                payload = json.dumps({
                    "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200},
                }).encode()  # fmt: skip
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            try:
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return H


@pytest.fixture
def serve():
    servers = []

    def start(steps) -> tuple[Script, str]:
        script = Script(steps)
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return script, f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.fixture(scope="module")
def problem():
    return load_problem(FIXTURE)


def make_agent(api_base, language="pytorch", budget=AgentBudget(), **cfg):
    config = LLMConfig(model="openai/scripted-model", api_base=api_base, api_key="sk-test",
                       backoff_s=0.01, **cfg)  # fmt: skip
    agent = LLMAgent(config=config, language=language, meter=BudgetMeter(budget))
    agent.client._sleep = lambda s: None  # no real waiting between retries in tests
    return agent


def test_good_reply_becomes_candidate_with_tokens(serve, problem):
    script, base = serve([("ok", reply_with(TRITON_RMSNORM, "triton"))])
    agent = make_agent(base, language="triton")
    cand = agent.propose(problem, [], "cpu")
    assert isinstance(cand.solution, Solution)
    assert cand.solution.definition == "rmsnorm_small"
    assert cand.solution.spec.languages[0].value == "triton"
    assert "tl.rsqrt" in cand.solution.sources[0].content
    assert (cand.tokens_in, cand.tokens_out) == (1000, 200)
    assert cand.cost_usd == 0.0  # unknown model: no price
    assert cand.parent_id is None
    sent = script.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "The output format" in sent[0]["content"]
    assert "Language notes: `triton`" in sent[0]["content"]
    assert "rmsnorm_small" in sent[1]["content"]


def test_feedback_of_earlier_attempts_goes_into_next_turn(serve, problem):
    script, base = serve([("ok", reply_with(PYTORCH_RMSNORM, "pytorch", description="fixed"))])
    agent = make_agent(base)
    first = Solution.model_validate(json.loads(reply_with(PYTORCH_RMSNORM, "pytorch").split("```json\n")[1].split("\n```")[0]) | {"definition": "rmsnorm_small"})  # noqa: E501
    history = [
        AttemptFeedback("c-1", first, (
            WorkloadFeedback("rms-1", "COMPILE_ERROR", log_excerpt="building...\nkernel.cu(12): error: identifier \"foo\" is undefined\nninja: build stopped"),  # noqa: E501
        )),
        AttemptFeedback("c-2", first, (
            WorkloadFeedback("rms-1", "PASSED", latency_ms=0.02, t_b_ms=0.03, t_sol_ms=0.005, sol_score=0.6),
            WorkloadFeedback("rms-64", "INCORRECT_NUMERICAL", reason="2% of elements off", max_abs_error=0.31),
        )),
    ]  # fmt: skip
    cand = agent.propose(problem, history, "cpu")
    assert cand.parent_id == "c-2"
    msgs = script.requests[0]["messages"]
    roles = [m["role"] for m in msgs]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert 'identifier "foo" is undefined' in msgs[3]["content"]
    assert "building..." not in msgs[3]["content"]
    assert "T_SOL 0.005 ms" in msgs[5]["content"] and "SOL score 0.60" in msgs[5]["content"]
    assert "INCORRECT_NUMERICAL: 2% of elements off (max abs error 0.31)" in msgs[5]["content"]
    assert "parent c-1" in msgs[5]["content"]


@pytest.mark.parametrize(
    "text, expect",
    [
        ("I think you should use shared memory.", "no ```json fenced block"),
        ("```json\n{\"name\": \"x\", \"spec\": \n```", "not valid JSON"),
        ("```json\n" + json.dumps({"name": "x", "spec": {"languages": ["pytorch"], "entry_point": "k.py::run"},
                                   "sources": [{"path": "other.py", "content": ""}]}) + "\n```",
         "not among the sources"),
        (reply_with(PYTORCH_RMSNORM, "pytorch"), "this is a cuda_cpp run"),
    ],
)  # fmt: skip
def test_malformed_reply_is_a_failed_attempt_and_next_turn_says_why(serve, problem, text, expect):
    script, base = serve([("ok", text), ("ok", "still nothing")])
    agent = make_agent(base, language="cuda_cpp")
    with pytest.raises(ProposalFailed) as info:
        agent.propose(problem, [], "cpu")
    assert expect in info.value.reason
    assert info.value.tokens_in == 1000 and info.value.agent.startswith("llm:")
    with pytest.raises(ProposalFailed):
        agent.propose(problem, [], "cpu")
    assert expect in script.requests[1]["messages"][-1]["content"]


def test_rate_limit_then_success(serve, problem):
    script, base = serve([("status", 429), ("status", 429), ("ok", reply_with(PYTORCH_RMSNORM, "pytorch"))])
    agent = make_agent(base)
    cand = agent.propose(problem, [], "cpu")
    assert cand.solution.spec.entry_point == "kernel.py::run"
    assert len(script.requests) == 3
    assert agent.meter.calls == 3


def test_rate_limit_forever_gives_up(serve, problem):
    script, base = serve([("status", 429)] * 3)
    agent = make_agent(base, max_retries=2)
    with pytest.raises(ProposalFailed, match="RateLimitError after 3 requests"):
        agent.propose(problem, [], "cpu")
    assert len(script.requests) == 3


def test_timeout_is_retried(serve, problem):
    script, base = serve([("slow", 3.0, "late"), ("ok", reply_with(PYTORCH_RMSNORM, "pytorch"))])
    agent = make_agent(base, timeout_s=0.5)
    t = time.monotonic()
    cand = agent.propose(problem, [], "cpu")
    assert time.monotonic() - t < 3.0
    assert cand.solution.name == "cand"
    assert len(script.requests) == 2


def test_budget_exhaustion(serve, problem):
    script, base = serve([("ok", reply_with(PYTORCH_RMSNORM, "pytorch"))] * 3)
    agent = make_agent(base, budget=AgentBudget(max_tokens=2000))
    agent.propose(problem, [], "cpu")
    assert script.requests[0]["max_tokens"] == 2000  # output capped to what is left
    agent.propose(problem, [], "cpu")
    with pytest.raises(BudgetExhausted, match="token budget"):
        agent.propose(problem, [], "cpu")
    assert len(script.requests) == 2

    calls = make_agent(base, budget=AgentBudget(max_calls=1))
    calls.propose(problem, [], "cpu")
    with pytest.raises(BudgetExhausted, match="call budget"):
        calls.propose(problem, [], "cpu")


def test_money_budget_uses_litellm_cost_map(problem, monkeypatch):
    import agents.llm_client as lc

    litellm = lc.import_litellm()
    real = litellm.completion
    monkeypatch.setattr(
        litellm, "completion", lambda **kw: real(**kw, mock_response=reply_with(PYTORCH_RMSNORM, "pytorch"))
    )
    agent = LLMAgent(
        config=LLMConfig(model="gpt-4o-mini"), language="pytorch", meter=BudgetMeter(AgentBudget(max_usd=1e-9))
    )
    cand = agent.propose(problem, [], "cpu")
    assert cand.cost_usd > 0
    with pytest.raises(BudgetExhausted, match="money budget"):
        agent.propose(problem, [], "cpu")


def test_importing_the_agents_does_not_import_litellm():
    import subprocess
    import sys

    code = "import agents.llm, agents.registry, sys; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
