"""The exported Inductor candidates: Inductor's generated module per workload, with no compile at judge time.

On the CPU Inductor writes C++ kernels rather than Triton; everything else (capture, argument order, the
signature table, the judge) is the same code path as on a GPU.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from agents.base import AttemptFeedback, WorkloadFeedback
from agents.offline import compiled, export
from agents.offline.agent import OfflineAgent, plan
from sol_bench.inputs import make_inputs
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference
from tests.offline_problems import FIXTURE
from tests.test_agents_offline import judge_cli

PLAIN = export.VARIANTS[0]
assert not PLAIN.cuda_graph


def _exact(got, wants):
    for g, w in zip(got, wants):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.fixture(scope="module")
def rmsnorm():
    return load_problem(FIXTURE)


@pytest.fixture(scope="module")
def exported(rmsnorm):
    return export.export_problem(rmsnorm, "cpu", PLAIN)


def _entry(solution, tmp_path: Path):
    """The candidate's entry module, loaded from its files the way the judge stages them."""
    for s in solution.sources:
        (tmp_path / s.path).write_text(s.content)
    module = types.ModuleType("exported_under_test")
    module.__file__ = str(tmp_path / "kernel.py")
    exec(compile((tmp_path / "kernel.py").read_text(), module.__file__, "exec"), module.__dict__)
    return module


@pytest.mark.slow
def test_one_module_per_workload_signature_keyed_on_the_reference_arguments(rmsnorm, exported):
    assert len(exported) == len(rmsnorm.workloads) == 3  # T = 1, 7, 64
    rows = sorted(m.key[0][0][0] for m in exported)
    assert rows == [1, 7, 64]
    for m in exported:
        assert m.order == (0, 1) and m.single  # x and weight; eps is baked into the module
        assert "def call(" in m.source
    sol = export.solution(rmsnorm, exported, PLAIN)
    assert [s.path for s in sol.sources] == ["kernel.py", "exported_0.py", "exported_1.py", "exported_2.py"]
    assert sol.spec.languages[0].value == "pytorch"  # C++ kernels on the CPU, not Triton
    assert not sol.spec.destination_passing_style
    assert "torch.compile" not in sol.sources[0].content


@pytest.mark.slow
@pytest.mark.parametrize("variant", export.VARIANTS, ids=lambda v: v.name)
def test_exported_candidate_passes_the_judge_on_cpu(rmsnorm, exported, variant, tmp_path):
    """Both entries through the judge: the plain one returns its outputs, the graph one (which calls straight
    through off CUDA) writes into the outputs the judge passes."""
    pytest.importorskip("sol_bench.judge")
    sol = export.solution(rmsnorm, exported, variant)
    assert sol.spec.destination_passing_style == variant.cuda_graph
    statuses = judge_cli(rmsnorm, sol, tmp_path)
    assert statuses == ["PASSED"] * len(rmsnorm.workloads)


@pytest.mark.slow
def test_graph_variant_exports_kernels_that_store_into_the_outputs(rmsnorm, tmp_path):
    """The CUDA-graph variant's export is destination-passing: the output buffer is an argument of Inductor's
    module, whose kernel writes it (no copy after), and the candidate passes the judge."""
    pytest.importorskip("sol_bench.judge")
    graph = export.VARIANTS[1]
    assert graph.cuda_graph
    modules = export.export_problem(rmsnorm, "cpu", graph)
    assert len(modules) == 3 and all(m.outputs == 1 and m.order == (0, 1, 3) and not m.single for m in modules)
    assert all("return ()" in m.source and ".copy_(" not in m.source for m in modules)
    sol = export.solution(rmsnorm, modules, graph)
    assert sol.spec.destination_passing_style and "_graphed(_exported, args)" in sol.sources[0].content
    assert judge_cli(rmsnorm, sol, tmp_path) == ["PASSED"] * len(rmsnorm.workloads)
    with pytest.raises(ValueError, match="for the CUDA-graph variant"):
        export.solution(rmsnorm, modules, PLAIN)


@pytest.mark.slow
def test_entry_reproduces_the_reference_and_refuses_an_unknown_signature(rmsnorm, exported, tmp_path):
    entry = _entry(export.solution(rmsnorm, exported, PLAIN), tmp_path)
    ref = load_reference(rmsnorm.definition)
    for w in rmsnorm.workloads:
        inputs = make_inputs(rmsnorm.definition, w, "cpu", seed=21, reference=ref)
        got = entry.solforge_entry(*inputs.values())
        torch.testing.assert_close(got.float(), ref.run(*inputs.values()).float(), atol=1e-2, rtol=2e-2)
    x, weight, eps = make_inputs(rmsnorm.definition, rmsnorm.workloads[0], "cpu", seed=1, reference=ref).values()
    with pytest.raises(RuntimeError, match="no exported module for the input signature"):
        entry.solforge_entry(torch.cat([x, x]), weight, eps)  # two rows: no workload has that shape
    with pytest.raises(RuntimeError, match="no exported module"):
        entry.solforge_entry(x, weight, eps * 10)  # the scalar is part of the signature


@pytest.mark.parametrize(
    "source, why",
    [
        ("SCALE = torch.ones(8)\n\ndef run(x):\n    return x * SCALE\n", "not one of the reference's arguments"),
        ("def run(x):\n    y = x * 2\n    torch._dynamo.graph_break()\n    return y + 1\n", "torch.compile failed"),
        ("def run(x):\n    return x\n", "0 modules"),
    ],
)
def test_what_does_not_export_says_why(source, why):
    ns: dict = {"torch": torch}
    exec(compile(source, "<reference>", "exec"), ns)
    with pytest.raises(export.NotExportable, match=why) as err:
        export.export_workload(ns["run"], [torch.randn(4, 8)], PLAIN, "toy workload w1", _exact)
    assert "toy workload w1" in str(err.value)


def test_tuple_outputs_and_scalar_arguments_map_back():
    def run(x, n):
        return x * n, x.sum()

    x = torch.randn(4, 8)
    m = export.export_workload(run, [x, 3], PLAIN, "toy", _exact)
    assert m.order == (0,) and not m.single  # the int is a constant of the module, not an argument
    assert m.key[1] == ("s", 3)


def test_a_module_that_disagrees_is_not_exported():
    def run(x):
        return torch.relu(x) + 1

    def never(got, wants):
        raise AssertionError("5 of 32 elements differ")

    with pytest.raises(export.NotExportable, match="disagrees with the compiled reference: 5 of 32"):
        export.export_workload(run, [torch.randn(4, 8)], PLAIN, "toy", never)


TRITON_MODULE = """
triton_poi_fused_0 = async_compile.triton('triton_poi_fused_0', '''...''', device_str='cuda')
async_compile.wait(globals())

def call(args):
    arg0_1, = args
    buf0 = empty_strided_cuda((4, 8), (8, 1), torch.float32)
    triton_poi_fused_0.run(arg0_1, buf0, 32, stream=stream0)
    return (buf0, )
"""


def test_language_is_triton_only_without_library_calls():
    def module(src):
        return export.ExportedModule(((("s", 1),)), src, (0,), True)

    assert export.language([module(TRITON_MODULE)]) == "triton"
    with_mm = TRITON_MODULE.replace("    return (buf0, )", "    extern_kernels.mm(arg0_1, arg0_1, out=buf0)\n    return (buf0, )")
    assert export.language([module(TRITON_MODULE), module(with_mm)]) == "pytorch"
    aten = TRITON_MODULE.replace("    return (buf0, )", "    buf1 = aten.sort.default(buf0)\n    return (buf0, )")
    assert export.language([module(aten)]) == "pytorch"
    assert export.language([module("def call(args):\n    return ()\n")]) == "pytorch"  # C++ on the CPU
    method = "class Runner:\n    def call(self, args):\n" + "\n".join("    " + ln for ln in TRITON_MODULE.split("def call(args):\n")[1].splitlines())
    method = TRITON_MODULE.split("def call(args):")[0] + method + "\n\ndef get_args():\n    return aten.randn.default([4])\n"
    assert export.language([module(method)]) == "triton"  # call as Runner's method; aten after it is not in it


def test_plan_puts_exports_before_torch_compile_and_exports_lazily(rmsnorm):
    calls = []

    def exporter(problem, variant):
        calls.append(variant.name)
        raise export.NotExportable("not here")

    names = [p.name for p in plan(rmsnorm, "cuda:0", exporter=exporter)]
    refs = [n.split("__ref_")[1] for n in names if "__ref_" in n]
    assert refs[0] == "tuned"  # the reference's fastest way per signature: the sure pass and the bar
    assert refs[1] == compiled.FLOOR.name  # eager's numerics replayed as a CUDA graph, should the tuned one fail
    assert refs[2:4] == ["exported_cudagraph", "exported"]  # launch-bound: the graph-replayed one first
    assert refs[4:] == [v.name for v in compiled.ordered_variants(rmsnorm)] + ["eager"]
    assert calls == []  # nothing exported until a planned candidate is made
    assert not any("exported" in p.name for p in plan(rmsnorm, "cuda:0"))  # no exporter: no exports


def test_agent_exports_once_and_skips_what_does_not_export(rmsnorm, monkeypatch):
    calls = []

    def refuse(problem, device, variant, max_seconds=300.0):
        calls.append((problem.name, device, variant.name))
        raise export.NotExportable(f"{problem.name} workload rms-1: torch.compile failed: Unsupported")

    monkeypatch.setattr(export, "export_problem", refuse)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    agent = OfflineAgent(language="pytorch", precheck=False)  # a faked GPU: nothing to precheck on
    history: list[AttemptFeedback] = []
    names = []
    while (c := agent.propose(rmsnorm, history, "cuda:0")) is not None:
        names.append(c.solution.name)
        history.append(AttemptFeedback(c.solution.name, c.solution, (WorkloadFeedback("rms-1", "PASSED", 0.01),)))
    # the graph variant's export is destination-passing, the plain one's returns its results: one try each
    assert calls == [("rmsnorm_small", "cuda:0", "exported_cudagraph"), ("rmsnorm_small", "cuda:0", "exported")]
    skipped = agent.not_exported(rmsnorm)
    assert set(skipped) == {"rmsnorm_small__ref_exported_cudagraph", "rmsnorm_small__ref_exported"}
    assert all("torch.compile failed" in why for why in skipped.values())
    assert not any("exported" in n for n in names)
    assert {"rmsnorm_small__ref_inductor_cudagraph", "rmsnorm_small__ref_eager"} <= set(names)


def test_export_stops_at_its_time_budget(rmsnorm):
    with pytest.raises(export.NotExportable, match="over the export budget of 0 s") as err:
        export.export_problem(rmsnorm, "cpu", PLAIN, max_seconds=0.0)
    assert "workload rms-1" in str(err.value)  # the clock runs from the start: nothing fits in no time


def _drive(agent, problem, device="cuda:0"):
    history: list[AttemptFeedback] = []
    out = []
    while (c := agent.propose(problem, history, device)) is not None:
        out.append(c)
        history.append(AttemptFeedback(c.solution.name, c.solution, (WorkloadFeedback("rms-1", "PASSED", 0.01),)))
    return out


@pytest.mark.slow
def test_agent_proposes_the_exports_it_made(rmsnorm, exported, monkeypatch):
    made = []
    monkeypatch.setattr(export, "export_problem", lambda problem, device, v, s=0: made.append(v.name) or exported)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    got = _drive(OfflineAgent(only_groups=("reference/exported",), precheck=False), rmsnorm)  # no GPU to check on
    assert [c.solution.name for c in got] == ["rmsnorm_small__ref_exported_cudagraph", "rmsnorm_small__ref_exported"]
    assert made == ["exported_cudagraph", "exported"]
    graphed, plain = (c.solution.sources[0].content for c in got)
    # modules that return their results, in the graph variant: copied into the outputs
    assert "_graphed(_into(_exported, 1), args)" in graphed and "return _exported(*args)" in plain
    assert [s.path for s in got[0].solution.sources][1:] == ["exported_0.py", "exported_1.py", "exported_2.py"]


def test_agent_without_export_and_with_a_group_filter(rmsnorm, monkeypatch):
    made = []
    monkeypatch.setattr(export, "export_problem", lambda *a, **k: made.append(a) or ())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    names = [c.solution.name for c in _drive(OfflineAgent(plan_exports=False, only_groups=("reference/",)), rmsnorm)]
    assert names and all("__ref_" in n and "exported" not in n for n in names)
    assert made == []
