"""Planning and LLM workers a user can rely on: the LLM planner's validated answer and its fallback, provider
failures as failed attempts, the money budget held within one call, and runs building on earlier runs.

The campaign tests run ``solforge run`` against an OpenAI-compatible server on 127.0.0.1 (scripted replies,
priced through litellm's bundled cost map) with a judge that passes every first workload at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.llm_client import ProviderError, Reply
from solforge.planning.llm import LLMPlanner, UnusableAllocation, parse_allocation, planner_prompt
from solforge.planning.types import Allocation, ProblemStats

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"

STATS = [
    ProblemStats("rms", attempts=4, best_sol_score=0.9, best_speedup_vs_baseline=2.0, recent_gain=0.0,
                 failure_streak=0, cost_usd=0.1, gpu_minutes=1.0),
    ProblemStats("gemm", attempts=2, best_sol_score=0.3, best_speedup_vs_baseline=0.8, recent_gain=0.1,
                 failure_streak=1, cost_usd=0.2, gpu_minutes=2.0),
]  # fmt: skip


class Scripted:
    def __init__(self, answer, cost=None):
        self.answer, self.cost = answer, cost
        self.prompts: list[str] = []

    def complete(self, turns, *, max_output_tokens=None):
        self.prompts.append(turns[-1].content)
        if isinstance(self.answer, Exception):
            raise self.answer
        return Reply(self.answer, 10, 10, self.cost, 1)


class Even:
    def allocate(self, stats, slots):
        return Allocation({s.problem: slots // len(stats) for s in stats}, {s.problem: "even" for s in stats})


def block(obj) -> str:
    return "Here is my plan.\n```json\n" + json.dumps(obj) + "\n```"


def test_valid_answer_is_used_and_priced():
    client = Scripted(block({"attempts": {"gemm": 6, "rms": 1}, "reasons": {"gemm": "headroom"}}), cost=0.002)
    planner = LLMPlanner(client, Even())
    alloc = planner.allocate(STATS, 8)
    assert alloc.attempts == {"gemm": 6, "rms": 1} and alloc.reasons["gemm"] == "headroom"
    assert (alloc.planner, alloc.fallback, alloc.cost_usd) == ("llm", None, 0.002)
    assert '"best_sol_score": 0.3' in client.prompts[0] and "8 attempt slots" in client.prompts[0]


@pytest.mark.parametrize(
    "answer, why",
    [
        ("no json here", "no JSON allocation"),
        (block({"attempts": {"gemm": 9}}), "sum to 9 > 8"),
        (block({"attempts": {"gemm": -1}}), "non-negative integer"),
        (block({"attempts": {"gemm": 2.5}}), "non-negative integer"),
        (block({"attempts": {"gemm": True}}), "non-negative integer"),
        (block({"attempts": {"attention": 1}}), "unknown problem 'attention'"),
        (block({"attempts": {"gemm": 1}, "stopped": ["nope"]}), "unknown problem"),
        (block({"attempts": {"gemm": 1}, "reasons": ["x"]}), "non-negative integers per problem"),
        (block(["gemm"]), "no 'attempts' mapping"),
        (ProviderError("RateLimitError after 5 requests", 5), "RateLimitError"),
    ],
)  # fmt: skip
def test_unusable_answer_falls_back_with_its_reason(answer, why):
    planner = LLMPlanner(Scripted(answer, cost=0.001), Even())
    alloc = planner.allocate(STATS, 8)
    assert alloc.attempts == {"rms": 4, "gemm": 4} and alloc.planner == "rules"
    assert why in alloc.fallback and why in planner.last_error
    assert alloc.cost_usd == (0.0 if isinstance(answer, Exception) else 0.001)  # a paid bad answer still costs


def test_parse_allocation_rejects_what_the_rules_forbid():
    with pytest.raises(UnusableAllocation, match="sum to 3 > 2"):
        parse_allocation(block({"attempts": {"gemm": 2, "rms": 1}}), STATS, 2)
    assert planner_prompt(STATS, 3).count('"problem"') == 2


def test_default_parent_is_the_best_passing_attempt_else_the_latest():
    from agents.base import AttemptFeedback, WorkloadFeedback
    from sol_bench.problem import load_solution
    from tasks.generate import default_parent

    sol = load_solution(REPO / "tests" / "fixtures" / "solutions" / "rmsnorm_pytorch.json")

    def attempt(cid, status, score=None):
        return AttemptFeedback(cid, sol, (WorkloadFeedback("w", status, sol_score=score, latency_ms=1.0),))

    assert default_parent([]) is None
    assert default_parent([attempt("a", "RUNTIME_ERROR"), attempt("b", "COMPILE_ERROR")]) == "b"
    history = [attempt("a", "PASSED", 0.4), attempt("b", "PASSED", 0.7), attempt("c", "RUNTIME_ERROR")]
    assert default_parent(history) == "b"


# --- the campaign against a loopback model server ---------------------------------------------------------

AGENTS = '''
from agents.budget import AgentBudget, BudgetMeter
from agents.llm import LLMAgent
from agents.llm_client import LLMConfig


def make(language=None, model=None, api_base=None, device="cpu", budget=None):
    config = LLMConfig(model=model, api_base=api_base, api_key="sk-test", timeout_s=1.0, max_retries=0)
    return LLMAgent(config, language="pytorch", meter=BudgetMeter(budget or AgentBudget()))
'''

FAKE_JUDGE = '''#!{python}
import json, sys
from pathlib import Path
args = sys.argv[1:]
problem = Path(args[3])
name = json.loads((problem / "definition.json").read_text())["name"]
sol = json.loads(Path(args[args.index("--solution") + 1]).read_text())["name"]
w = json.loads((problem / "workload.jsonl").read_text().splitlines()[0])
ev = {{"status": "PASSED", "environment": {{"hardware": "fake"}},
      "correctness": {{"max_relative_error": 0.0, "max_absolute_error": 0.0}},
      "performance": {{"latency_ms": 0.5, "reference_latency_ms": 1.0, "speedup_factor": 2.0}}, "t_sol_ms": 0.01}}
print(json.dumps({{"definition": name, "solution": sol, "workload": w, "evaluation": ev}}))
'''

KERNEL = "import torch\n\ndef run(x, weight, eps, y):\n    # {marker}\n    y.copy_(x)\n"
MODEL = "openai/gpt-4o-mini"  # in litellm's bundled cost map: every reply below has a price


def good_reply(marker: str) -> str:
    sol = {"name": marker, "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run"},
           "sources": [{"path": "kernel.py", "content": KERNEL.format(marker=marker)}]}  # fmt: skip
    return "```json\n" + json.dumps(sol) + "\n```"


class ModelServer:
    """Scripted replies for the agents, in order, and a fixed answer for the planner's prompt."""

    def __init__(self) -> None:
        self.agent_steps: list[tuple] = []
        self.planner_answer = "no allocation today"
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}/v1"

    def agent_requests(self, problem: str) -> list[dict]:
        return [r for r in self.requests if "You plan a campaign" not in r["messages"][0]["content"]
                and problem in r["messages"][1]["content"]]  # fmt: skip

    def _next(self, body: dict) -> tuple:
        with self.lock:
            self.requests.append(body)
            if "You plan a campaign" in body["messages"][0]["content"]:
                return ("ok", self.planner_answer)
            return self.agent_steps.pop(0) if self.agent_steps else ("status", 500)

    def _handler(self):
        server = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                step = server._next(body)
                if step[0] == "status":
                    payload = json.dumps({"error": {"message": f"status {step[1]}", "type": "server"}}).encode()
                    self.send_response(step[1])
                    self.send_header("Retry-After", "0")
                else:
                    if step[0] == "slow":
                        time.sleep(step[1])
                    payload = json.dumps({
                        "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": step[-1]}}],
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

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def _copy_fixture(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    definition = json.loads((FIXTURE / "definition.json").read_text()) | {"name": name}
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text((FIXTURE / "workload.jsonl").read_text())
    return d


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from solforge.prefect_env import prefect_server

    root = tmp_path_factory.mktemp("llm_runs")
    (root / "mod").mkdir()
    (root / "mod" / "planning_llm_agents.py").write_text(AGENTS)
    judge = root / "fake_judge"
    judge.write_text(FAKE_JUDGE.format(python=sys.executable))
    judge.chmod(0o755)
    for name in ("p1", "p2"):
        _copy_fixture(root / "problems", name)
    server = ModelServer()
    with prefect_server(root / "prefect") as prefect_env:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | prefect_env
        env |= {"SOLFORGE_JUDGE_PYTHON": str(judge), "SOLFORGE_JUDGE_SERVER": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "OPENAI_API_KEY": "sk-test",  # the planner reads the provider key from the environment, as a user sets it
                "PYTHONPATH": os.pathsep.join([str(root / "mod"), str(REPO), env.get("PYTHONPATH", "")])}
        yield root, server, env
    server.close()


def _run(world, run_id: str, problems: list[str], *extra: str) -> dict:
    root, server, env = world
    cmd = [sys.executable, "-m", "solforge", "run", *[str(root / "problems" / p) for p in problems],
           "--agent", "planning_llm_agents:make", "--model", MODEL, "--api-base", server.base, "--language", "pytorch",
           "--device", "cpu", "--max-workloads", "1", "--iterations", "1", "--data-dir", str(root / "data"),
           "--run-id", run_id, "--json", *extra]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _rows(world, sql: str) -> list[dict]:
    from solforge.store.query import query

    return query(world[0] / "data", sql).to_pylist()


@pytest.mark.timeout(200)
def test_provider_failures_are_failed_attempts_and_the_run_goes_on(world):
    """Run 1 (LLM planner whose answer is unusable): a malformed reply, a timeout, a 429 and a 500 each become
    a failed attempt with its reason and cost; the next two replies are candidates."""
    _, server, _ = world
    server.agent_steps = [("ok", "I would use shared memory."), ("slow", 3.0, good_reply("late")),
                          ("status", 429), ("status", 503), ("ok", good_reply("first-best")),
                          ("ok", good_reply("second"))]  # fmt: skip
    out = _run(world, "r1", ["p1"], "--max-candidates", "6", "--planner", "llm")
    failures = _rows(world, "SELECT attempt, reason, cost_usd, agent FROM failures WHERE run_id = 'r1' ORDER BY attempt")
    reasons = [f["reason"] for f in failures]
    assert [f["attempt"] for f in failures] == [0, 1, 2, 3], reasons
    assert "malformed reply" in reasons[0] and failures[0]["cost_usd"] > 0
    assert "Timeout" in reasons[1] and "RateLimitError" in reasons[2] and "ServiceUnavailable" in reasons[3], reasons
    assert all(f["agent"].startswith("llm:") for f in failures)
    cands = _rows(world, "SELECT attempt, cost_usd FROM candidates WHERE run_id = 'r1' ORDER BY attempt")
    assert [c["attempt"] for c in cands] == [4, 5] and all(c["cost_usd"] > 0 for c in cands)
    assert out["failures"] == 4
    decisions = _rows(world, "SELECT planner, reason, cost_usd FROM decisions WHERE run_id = 'r1'")
    assert decisions and all(d["planner"] == "rules" for d in decisions)
    fell_back = [d for d in decisions if d["reason"].startswith("LLM planner's answer unusable (no JSON allocation")]
    assert fell_back and all("rules: weight" in d["reason"] for d in fell_back), decisions
    assert sum(d["cost_usd"] for d in decisions) > 0  # the planner's calls are priced and stored


@pytest.mark.timeout(200)
def test_second_run_starts_from_the_first_runs_best_and_holds_the_money_budget(world):
    _, server, _ = world
    server.agent_steps = [("ok", good_reply(f"next-{i}")) for i in range(10)]
    before = len(server.requests)
    budget = 0.0006
    out = _run(world, "r2", ["p1", "p2"], "--max-candidates", "10", "--budget-usd", str(budget))
    assert out["stop_reason"] == "money budget spent"
    calls = server.requests[before:]
    per_call = _rows(world, "SELECT max(cost_usd) AS c FROM candidates WHERE run_id = 'r2'")[0]["c"]
    spent = _rows(world, "SELECT sum(cost_usd) AS s FROM candidates WHERE run_id = 'r2'")[0]["s"]
    assert per_call > 0 and budget <= spent < budget + per_call, (spent, per_call)
    assert len(calls) == _rows(world, "SELECT count(*) AS n FROM candidates WHERE run_id = 'r2'")[0]["n"]

    from solforge.store.report_queries import winners

    [best] = winners(world[0] / "data", ["r1"])
    first = next(r for r in calls if r in server.agent_requests("p1"))
    earlier = [m["content"] for m in first["messages"] if m["role"] == "assistant"]
    assert earlier and "first-best" in earlier[-1]  # the best earlier source is where it starts
    assert "PASSED" in first["messages"][-1]["content"] and "SOL score" in first["messages"][-1]["content"]
    parents = _rows(world, "SELECT problem, attempt, parent_id FROM candidates WHERE run_id = 'r2' ORDER BY problem, attempt")
    p1 = [r for r in parents if r["problem"] == "p1"]
    assert p1[0]["parent_id"] == best.candidate_id
    assert all(r["parent_id"] for r in p1[1:])  # every later attempt names its parent too
