"""Tracing a reference whose shapes depend on its data: meta first, then a real CPU run, else an unknown signature."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agents.offline.agent import OfflineAgent
from agents.offline.graph import OpSignature, trace_ops
from agents.offline.templates import FAMILIES
from agents.offline.templates.probe import Probe
from sol_bench.inputs import make_inputs
from sol_bench.problem import Problem, load_problem
from sol_bench.reference import load_reference

REPO = Path(__file__).resolve().parents[1]
RMSNORM = REPO / "tests" / "fixtures" / "problems" / "rmsnorm_small"

# A router's bookkeeping: a histogram of expert ids, the experts present, the non-empty bins, a boolean mask.
_ROUTING = """import torch

def run(idx, x):
    counts = torch.bincount(idx, minlength=64)
    present = torch.unique(idx)
    active = torch.nonzero(counts).flatten()
    seen = torch.zeros(64, dtype=torch.bool)
    seen[present] = True
    picked = x[seen[idx]]
    scale = counts.float() / active.numel() + picked.sum() * 0.0
    return x * scale[idx].unsqueeze(-1)
"""

# Custom inputs that call unique (no meta kernel) while making them; the reference itself is plain.
_CUSTOM_UNIQUE = """import torch

def make(axes, device):
    t = axes["T"]
    idx = torch.randint(0, 8, (t,), device=device)
    groups = torch.unique(idx)
    x = torch.randn(t, 4, device=device) + groups.numel()
    return {"idx": idx, "x": x}

def run(idx, x):
    return x * 2.0
"""

_FAILS_EVERYWHERE = """import torch

def run(x):
    if x.sum().item() > -1e30:
        raise ValueError("this reference never computes anything")
    return x
"""


def _write_problem(root: Path, name: str, reference: str, inputs: dict, outputs: dict, workloads: list[dict],
                   **extra) -> Problem:  # fmt: skip
    d = root / name
    d.mkdir(parents=True)
    definition = {"name": name, "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 4}},
                  "inputs": inputs, "outputs": outputs, "reference": reference, **extra}  # fmt: skip
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return load_problem(d)


def _random(name: str, t: int, *inputs: str) -> dict:
    return {"uuid": f"{name}-{t}", "axes": {"T": t}, "inputs": {n: {"type": "random"} for n in inputs}}


@pytest.fixture
def routing(tmp_path) -> Problem:
    return _write_problem(
        tmp_path, "routing_histogram", _ROUTING,
        {"idx": {"shape": ["T"], "dtype": "int64"}, "x": {"shape": ["T", "H"], "dtype": "float32"}},
        {"y": {"shape": ["T", "H"], "dtype": "float32"}},
        [_random("r", 4096, "idx", "x"), _random("r", 16, "idx", "x")],
    )  # fmt: skip


def test_a_reference_with_data_dependent_ops_is_traced_on_the_cpu(routing):
    sig = trace_ops(routing)
    assert sig.method == "cpu" and sig.known
    assert sig.has("bincount", "nonzero", "_unique2"), str(sig)
    assert "meta" in sig.note and "[traced on the CPU]" in str(sig)


def test_the_cpu_fallback_runs_the_smallest_workload_and_respects_the_size_cap(routing):
    assert trace_ops(routing, max_bytes=16 * 4 * 2 * 8).method == "cpu"  # the 16-row workload fits, not the 4096
    unknown = trace_ops(routing, max_bytes=64)
    assert unknown.method == "none" and not unknown.known and not unknown.ops
    assert "smallest workload" in unknown.note and str(unknown).startswith("unknown (")


def test_offline_agent_proposes_for_a_data_dependent_reference(routing):
    first = OfflineAgent(max_candidates=1, plan_exports=False).propose(routing, [], "cpu")
    assert first is not None and first.solution.definition == routing.name


def test_the_probe_runs_a_data_dependent_reference(routing):
    probe = Probe(routing)
    assert probe.cases and probe.skipped is None
    assert probe.cases[0].workload.uuid == "r-16"  # the smallest first


def test_custom_inputs_that_call_unique_trace_and_probe(tmp_path):
    p = _write_problem(
        tmp_path, "custom_unique", _CUSTOM_UNIQUE,
        {"idx": {"shape": ["T"], "dtype": "int64"}, "x": {"shape": ["T", "H"], "dtype": "float32"}},
        {"y": {"shape": ["T", "H"], "dtype": "float32"}},
        [{"uuid": "c-8", "axes": {"T": 8}, "inputs": {"idx": {"type": "custom"}, "x": {"type": "custom"}}}],
        custom_inputs_entrypoint="make",
    )  # fmt: skip
    ref = load_reference(p.definition)
    cpu = make_inputs(p.definition, p.workloads[0], "cpu", seed=3, reference=ref)
    assert cpu["x"].shape == (8, 4)
    sig = trace_ops(p)
    assert sig.method == "cpu" and sig.has("mul"), str(sig)
    assert Probe(p).cases
    assert OfflineAgent(max_candidates=1, plan_exports=False).propose(p, [], "cpu") is not None


def test_a_reference_that_fails_everywhere_gets_an_unknown_signature_that_binds_nothing(tmp_path):
    p = _write_problem(tmp_path, "fails", _FAILS_EVERYWHERE, {"x": {"shape": ["T", "H"], "dtype": "float32"}},
                       {"y": {"shape": ["T", "H"], "dtype": "float32"}}, [_random("f", 2, "x")])  # fmt: skip
    sig = trace_ops(p)
    assert sig.method == "none" and "ValueError" in sig.note and "meta" in sig.note
    probe = Probe(p)
    assert not probe.cases and "ValueError" in (probe.skipped or "")
    assert all(fam.match(p, sig, probe) == [] for fam in FAMILIES)
    # the agent still plans the reference itself rather than raising
    assert OfflineAgent(max_candidates=1, plan_exports=False).propose(p, [], "cpu") is not None


def test_an_empty_signature_is_not_a_subset_of_every_op_set():
    assert not OpSignature(Counter()).only({"mul", "add"})
    assert OpSignature(Counter({"mul": 1})).only({"mul", "add"})


def test_a_plain_reference_is_still_traced_on_meta():
    sig = trace_ops(load_problem(RMSNORM))
    assert sig.method == "meta" and sig.note == "" and sig.has("rsqrt", "mean")
    assert "[traced" not in str(sig)

