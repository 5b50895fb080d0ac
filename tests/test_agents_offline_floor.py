"""A correct floor on every problem: the reference replayed as a CUDA graph (eager's numerics) proposed first,
capture failures that fall back to eager, Inductor candidates checked against eager before they are offered,
Inductor's C++ backend on the CPU, and the export kept to what the judge's worker passes and runs under."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import sys
import types

import pytest
import torch

from agents.base import AttemptFeedback, WorkloadFeedback
from agents.offline import compiled, export, precheck, replay
from agents.offline.agent import OfflineAgent, plan
from agents.offline.search import Option, SearchPolicy, Verdict
from sol_bench.inputs import make_inputs
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference
from tests.offline_problems import FIXTURE, run_solution_here
from tests.test_agents_offline import judge_cli


@pytest.fixture(scope="module")
def rmsnorm():
    return load_problem(FIXTURE)


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, "kernel.py", "exec"), module.__dict__)
    return module


# ---- the floor ----------------------------------------------------------------------------------------------


def test_floor_is_eager_replayed_through_a_graph_and_second_to_the_tuned_reference_on_a_gpu(rmsnorm):
    sol = compiled.solution(rmsnorm, compiled.FLOOR)
    src = sol.sources[0].content
    assert sol.spec.destination_passing_style and "_compiled = _target" in src and "torch.compile" not in src
    assert "_target = _into(_reference_run, 1)" in src and "_graphed(_compiled, args)" in src
    tuned, second = itertools.islice(plan(rmsnorm, "cuda:0"), 2)
    # the tuned reference leads, a sure pass and the bar; the graph of eager stands behind it
    assert tuned.name.endswith("__ref_tuned") and tuned.floor and tuned.bar and not tuned.inductor
    assert second.floor and second.name == sol.name and not second.inductor and not second.bar
    # the CUDA graph path is inert on the CPU: the floor computes the reference into NaN-filled outputs
    run_solution_here(rmsnorm, sol, calls=2)
    # only where the reference is wanted: a CUDA C++ run plans no floor
    assert not any(p.floor for p in plan(rmsnorm, "cuda:0", "cuda_cpp"))


@pytest.mark.slow
def test_floor_passes_the_judge_on_cpu(rmsnorm, tmp_path):
    sol = compiled.solution(rmsnorm, compiled.FLOOR)
    assert judge_cli(rmsnorm, sol, tmp_path) == ["PASSED"] * len(rmsnorm.workloads)


class FakeCuda:
    """Stands in for ``torch.cuda`` in a candidate's replay helpers: records streams and captures; a capture
    whose body synchronizes fails as CUDA does (the body raises, then ``capture_end`` reports the capture
    invalidated)."""

    def __init__(self):
        self.current = "default"
        self.capturing = False
        self.events: list[str] = []
        cuda = self

        class Graph:
            def capture_begin(self):
                cuda.capturing, cuda.invalidated = True, False  # each capture fails or ends on its own
                cuda.events.append(f"begin on {cuda.current}")

            def capture_end(self):
                cuda.capturing = False
                cuda.events.append("end")
                if cuda.invalidated:
                    raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

            def replay(self):
                cuda.events.append("replay")

        self.CUDAGraph = Graph
        self.invalidated = False

    def synchronize(self):
        if self.capturing:
            self.invalidated = True
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    def is_current_stream_capturing(self):
        return self.capturing

    def Stream(self):  # noqa: N802 - the name torch.cuda has
        return types.SimpleNamespace(name=f"side{len(self.events)}", wait_stream=lambda other: None)

    def current_stream(self):
        return types.SimpleNamespace(name=self.current, wait_stream=lambda other: None)

    @contextlib.contextmanager
    def stream(self, s):
        before, self.current = self.current, s.name
        try:
            yield
        finally:
            self.current = before


def test_a_failed_capture_runs_eagerly_from_then_on_and_leaves_the_stream_as_it_was(capsys):
    helpers = _module(compiled.replay_source(), "replay_under_test")
    fake = FakeCuda()
    helpers._cuda = fake
    helpers._on_device = lambda tensors: True  # CPU tensors stand in for CUDA ones
    calls = []

    def syncs(x, out):  # a data-dependent op: .item() synchronizes with the host
        calls.append(fake.capturing)
        fake.synchronize()
        out.copy_(x * 2)

    x, out = torch.arange(4.0), torch.zeros(4)
    helpers._graphed(syncs, (x, out))
    assert torch.equal(out, x * 2)
    # the failed capture, then an empty one that ends cleanly (it clears torch's generator's capture mark)
    assert fake.events == ["begin on side0", "end", "begin on side2", "end"]
    assert fake.current == "default" and not fake.capturing
    assert calls == [False, False, False, True, False]  # 3 warm-ups, the capture, then the eager call
    assert helpers._graphs == {} and "operation not permitted" in next(iter(helpers._uncapturable.values()))
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("solforge graph")]
    # the judge puts the line in the trace; it names the innermost frame outside torch, here the fake's call
    assert len(said) == 1 and re.fullmatch(
        r"solforge graph \[\(4,\), \(4,\)\]: not captured, runs eagerly \(RuntimeError: CUDA error: operation not "
        r"permitted when stream is capturing; in synchronize, test_agents_offline_floor\.py:\d+: raise RuntimeError\(.*\)\)",
        said[0])  # fmt: skip
    # same signature, other buffers: no second capture, straight to eager
    fake.invalidated = False
    out2 = torch.zeros(4)
    helpers._graphed(syncs, (x + 1, out2))
    assert torch.equal(out2, (x + 1) * 2) and calls[-1] is False and len(fake.events) == 4

    def pure(x, out):
        out.copy_(x * 3)

    helpers._graphed(pure, (torch.zeros(8), torch.zeros(8)))  # another signature still captures and replays
    assert fake.events[4:] == ["begin on side4", "end", "replay"] and len(helpers._graphs) == 1

    # one of a tuned candidate's ways (tagged): its line says which way, so a report does not read it as the call's
    capsys.readouterr()
    helpers._graphed(syncs, (x, torch.zeros(4)), tag="eager")
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("solforge graph")]
    assert line.startswith("solforge graph [(4,), (4,)]: the eager way not captured, runs eagerly (RuntimeError: ")


def test_real_capture_helpers_propagate_an_eager_failure():
    """An error the body raises outside any capture (eagerly, off CUDA) is the candidate's, not swallowed."""
    helpers = _module(compiled.replay_source(), "replay_errors_under_test")

    def broken(x, out):
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError, match="shape mismatch"):
        helpers._graphed(broken, (torch.zeros(2), torch.zeros(2)))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_floor_falls_back_to_eager_where_capture_syncs_on_a_gpu():
    helpers = _module(compiled.replay_source(), "replay_gpu_under_test")

    def data_dependent(x, out):
        n = int((x > 0).sum().item())  # synchronizes: refused inside a capture
        out.copy_(x * n + torch.nonzero(x > 0).shape[0])

    x = torch.randn(64, device="cuda")
    out = torch.full_like(x, float("nan"))
    helpers._graphed(data_dependent, (x, out))
    n = int((x > 0).sum())
    torch.testing.assert_close(out, x * n + n)
    assert helpers._graphs == {} and len(helpers._uncapturable) == 1
    assert torch.cuda.current_stream() == torch.cuda.default_stream() and not torch.cuda.is_current_stream_capturing()
    y = torch.randn(64, device="cuda")
    torch.testing.assert_close(y.sum().item(), float(y.cpu().sum()), rtol=1e-5, atol=1e-5)  # syncs work again


# ---- the search -----------------------------------------------------------------------------------------------


def _options() -> list[Option]:
    return [Option("floor", "reference/eager_cudagraph", {}, floor=True),
            Option("t1", "rms/triton/0", {"b": 1}), Option("t2", "rms/triton/0", {"b": 2}),
            Option("exported", "reference/exported", {}), Option("eager", "reference/eager", {})]  # fmt: skip


def test_policy_picks_the_floor_while_nothing_has_passed():
    policy = SearchPolicy()
    opts = _options()
    moved = opts[1:3] + opts[:1] + opts[3:]  # wherever it is planned
    assert policy.next(moved, set(), {}).name == "floor"
    failed = {"t1": Verdict(math.inf, False)}
    assert policy.next(moved, {"t1"}, failed).name == "floor"
    # after a pass, the usual order: the floor waits with the other reference groups
    passed = {"t1": Verdict(1.0, False)}
    assert policy.next(moved, {"t1"}, passed).name == "exported"
    # proposed floor: the templates, then the reference's first candidate after them (the floor is no bar)
    done = {"floor": Verdict(2.0, False)}
    assert policy.next(opts, {"floor"}, done).name == "t1"
    done["t1"] = Verdict(1.0, False)
    assert policy.next(opts, {"floor", "t1"}, done).name == "exported"
    # an unavailable floor is absent: nothing else changes
    assert policy.next(opts, set(), {}, unavailable={"floor"}).name == "t1"


def test_policy_tries_the_floors_in_order_until_one_passes_and_a_measured_bar_is_not_measured_again():
    """The GPU's plan: the tuned reference (a sure pass and the bar), then the graph of eager behind it."""
    policy = SearchPolicy()
    opts = [Option("tuned", "reference/tuned", {}, floor=True, bar=True), *_options()]
    assert policy.next(opts, set(), {}).name == "tuned"
    # the tuned reference failed: the next floor
    assert policy.next(opts, {"tuned"}, {"tuned": Verdict(math.inf, True)}).name == "floor"
    # it passed: no other floor, the templates, and no second bar before the climb (the export waits)
    done = {"tuned": Verdict(2.0, False)}
    assert policy.next(opts, {"tuned"}, done).name == "t1"
    done["t1"] = Verdict(1.0, False)
    assert policy.next(opts, {"tuned", "t1"}, done).name == "t2"
    done["t2"] = Verdict(1.5, False)
    rest = []
    while (o := policy.next(opts, set(done), done)) is not None:
        rest.append(o.name)
        done[o.name] = Verdict(3.0, False)
    assert rest == ["exported", "eager"]  # the floor left is never proposed once one has passed


# ---- the numerics precheck ------------------------------------------------------------------------------------


def _lossy(solution):
    """The candidate with its compiled function replaced by one that adds 0.25 (misses any tolerance)."""
    lossy = "\n\n_exact = _compiled\n_compiled = lambda *a: _exact(*a) + 0.25\n\n\ndef solforge_entry("
    src = solution.sources[0].content.replace("\n\ndef solforge_entry(", lossy)
    return solution.model_copy(update={"sources": [solution.sources[0].model_copy(update={"content": src})]})


def test_precheck_rejects_a_candidate_that_misses_the_tolerance_and_keeps_a_good_one(rmsnorm):
    w = precheck.smallest_workload(rmsnorm)
    assert w.uuid == "rms-1"
    good = compiled.solution(rmsnorm, compiled.EAGER)
    assert precheck.check_here(rmsnorm, good, "cpu").ok
    assert precheck.check_here(rmsnorm, compiled.solution(rmsnorm, compiled.FLOOR), "cpu").ok  # destination-passing
    bad = precheck.check_here(rmsnorm, _lossy(good), "cpu")
    assert not bad.ok and "workload rms-1" in bad.reason and "misses the eager reference's tolerance" in bad.reason
    # the same through the time-boxed child process
    child = precheck.check(rmsnorm, _lossy(good), "cpu", timeout_s=120)
    assert not child.ok and "misses the eager reference's tolerance" in child.reason


def test_precheck_imports_a_candidate_s_own_modules_as_the_judge_does(rmsnorm):
    # The subgraph candidate ships a package beside its entry; the judge's worker puts the candidate's directory on
    # the import path, and the precheck did not: every such candidate failed to load there and was never offered.
    good = compiled.solution(rmsnorm, compiled.EAGER)
    entry = good.sources[0]
    src = entry.content.replace("\n\ndef solforge_entry(", "\n\nfrom precheck_own_pkg.scale import ONE\n\n\ndef solforge_entry(")
    assert src != entry.content
    own = [entry.model_copy(update={"content": src}),
           entry.model_copy(update={"path": "precheck_own_pkg/__init__.py", "content": ""}),
           entry.model_copy(update={"path": "precheck_own_pkg/scale.py", "content": "ONE = 1.0\n"})]  # fmt: skip
    sol = good.model_copy(update={"sources": own})
    before = list(sys.path)
    got = precheck.check_here(rmsnorm, sol, "cpu")
    assert got.ok, got.reason
    assert sys.path == before  # the candidate's directory is taken off the path again
    child = precheck.check(rmsnorm, sol, "cpu", timeout_s=120)
    assert child.ok, child.reason
    # and a module the candidate does not ship is still a load failure, named
    unshipped = own[0].model_copy(update={"content": src.replace("precheck_own_pkg", "precheck_unshipped_pkg")})
    bad = precheck.check_here(rmsnorm, sol.model_copy(update={"sources": [unshipped, *own[1:]]}), "cpu")
    assert not bad.ok and "failed to load" in bad.reason and "precheck_unshipped_pkg" in bad.reason


def test_precheck_stops_at_its_time_box(rmsnorm):
    good = compiled.solution(rmsnorm, compiled.EAGER)
    sleeps = "\n\nimport time\ntime.sleep(60)\n\n\ndef solforge_entry("
    src = good.sources[0].content.replace("\n\ndef solforge_entry(", sleeps)
    slow = good.model_copy(update={"sources": [good.sources[0].model_copy(update={"content": src})]})
    got = precheck.check(rmsnorm, slow, "cpu", timeout_s=3)
    assert not got.ok and "over 3 s" in got.reason and got.seconds < 30


def test_precheck_runs_where_the_judge_would_run_the_candidate(monkeypatch):
    assert precheck.check_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precheck.check_device("cuda:0") is None  # a CPU worker planning for a GPU checks nothing
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert precheck.check_device("cuda:1") == "cuda:1"


def _all_proposals(agent, problem) -> list[str]:
    history: list[AttemptFeedback] = []
    while (c := agent.propose(problem, history, "cpu")) is not None:
        history.append(AttemptFeedback(c.solution.name, c.solution, (WorkloadFeedback("rms-1", "PASSED", 0.01),)))
    return [a.solution.name for a in history]


def test_agent_offers_inductor_on_the_cpu_after_eager_and_skips_what_the_precheck_rejects(rmsnorm, monkeypatch):
    cpu = list(plan(rmsnorm, "cpu"))
    assert cpu[0].name.endswith("__ref_eager") and cpu[0].floor
    assert cpu[1].name.endswith("__ref_tuned") and not cpu[1].inductor  # it checks Inductor's numerics itself
    last_template = max(i for i, p in enumerate(cpu) if not p.group.startswith("reference/"))
    inductor = next(i for i, p in enumerate(cpu) if p.name.endswith("__ref_inductor_cpu"))
    assert cpu[inductor].inductor and inductor > last_template
    assert "_torch.compile(_target, dynamic=False, mode='default')" in cpu[inductor].solution.sources[0].content
    checked = []

    def fake_check(problem, solution, device, timeout_s):
        checked.append((solution.name, device))
        return precheck.Outcome(False, "workload rms-1: misses the eager reference's tolerance: 3% within")

    monkeypatch.setattr(precheck, "check", fake_check)
    agent = OfflineAgent(max_candidates=len(cpu))
    names = _all_proposals(agent, rmsnorm)
    assert names[:2] == [cpu[0].name, cpu[1].name] and not any("inductor" in n for n in names)
    assert checked == [("rmsnorm_small__ref_inductor_cpu", "cpu")]  # once: the verdict is kept
    assert "3% within" in agent.numerics_rejected(rmsnorm)["rmsnorm_small__ref_inductor_cpu"]
    # a passing check lets it through; no precheck asked for: not checked at all
    monkeypatch.setattr(precheck, "check", lambda *a, **k: precheck.Outcome(True))
    assert cpu[inductor].name in _all_proposals(OfflineAgent(max_candidates=len(cpu)), rmsnorm)
    monkeypatch.setattr(precheck, "check", lambda *a, **k: pytest.fail("checked although precheck=False"))
    assert cpu[inductor].name in _all_proposals(OfflineAgent(max_candidates=len(cpu), precheck=False), rmsnorm)


@pytest.mark.slow
def test_inductor_cpu_candidate_passes_the_precheck_and_the_judge(rmsnorm, tmp_path):
    """Inductor's C++ backend compiles here (g++) and the candidate passes the judge on the CPU."""
    sol = compiled.solution(rmsnorm, compiled.CPU_VARIANTS[0])
    got = precheck.check(rmsnorm, sol, "cpu", timeout_s=240)
    assert got.ok, got.reason
    assert judge_cli(rmsnorm, sol, tmp_path) == ["PASSED"] * len(rmsnorm.workloads)


# ---- the export, kept to the judge's inputs and flags ---------------------------------------------------------


def _custom_problem(tmp_path, reference: str, name: str):
    d = tmp_path / name
    d.mkdir()
    definition = {
        "name": name, "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 16}},
        "custom_inputs_entrypoint": "make",
        "inputs": {"x": {"shape": ["T", "H"], "dtype": "float32"}, "pos": {"shape": None, "dtype": "int64"}},
        "outputs": {"y": {"shape": ["T", "H"], "dtype": "float32"}}, "reference": reference,
    }  # fmt: skip
    (d / "definition.json").write_text(json.dumps(definition))
    wl = {"uuid": "w1", "axes": {"T": 4}, "inputs": {"x": {"type": "custom"}, "pos": {"type": "custom"}}}
    (d / "workload.jsonl").write_text(json.dumps(wl) + "\n")
    return load_problem(d)


SEEDED_SCALAR = """import torch

def make(axes, device):
    return {"x": torch.randn(axes["H"], axes["T"], device=device).t(), "pos": int(torch.randint(0, 100, ()))}

def run(x, pos):
    return x * pos
"""


def test_export_refuses_a_scalar_that_changes_with_the_seed(tmp_path):
    p = _custom_problem(tmp_path, SEEDED_SCALAR, "seeded_scalar")
    with pytest.raises(export.NotExportable, match="input 'pos' changes with the seed"):
        export.export_problem(p, "cpu", export.VARIANTS[0])


def test_export_keys_on_the_judge_s_contiguous_buffers_and_restores_precision_flags(tmp_path):
    src = SEEDED_SCALAR.replace('int(torch.randint(0, 100, ()))', "3").replace(
        "import torch\n", "import torch\n\ntorch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False\n")
    p = _custom_problem(tmp_path, src, "strided_input")
    before = export.precision_flags()
    try:
        ref = load_reference(p.definition)  # sets the flag in this process, as in the judge's
        x = make_inputs(p.definition, p.workloads[0], "cpu", seed=1, reference=ref)["x"]
        assert not x.is_contiguous()  # the custom function's view; the judge passes a contiguous copy of it
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        [m] = export.export_problem(p, "cpu", export.VARIANTS[0])
        assert m.key[0] == ((4, 16), "torch.float32", (16, 1)) and m.order == (0,)
        assert m.precision["matmul.allow_bf16_reduced_precision_reduction"] is False  # the reference's own flag
        assert export.precision_flags()["matmul.allow_bf16_reduced_precision_reduction"] is True  # restored
        entry = export.solution(p, [m], export.VARIANTS[0]).sources[0].content
        assert "'matmul.allow_bf16_reduced_precision_reduction': False" in entry
    finally:
        export.set_precision_flags(before)
