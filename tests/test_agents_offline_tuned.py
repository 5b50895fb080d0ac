"""The tuned reference: per input signature the fastest way of running it, among those that keep to the
reference's numerics (``agents/offline/tuned.py``), and its candidate (``compiled.tuned_solution``)."""

from __future__ import annotations

import types
from collections import Counter
from dataclasses import replace

import pytest
import torch

from agents.offline import compiled, replay
from agents.offline.graph import OpSignature, trace_ops
from agents.offline.tuned import Tolerance, Tuned, Way, agrees
from sol_bench.models import Tolerance as Tol
from sol_bench.problem import load_problem
from tests.offline_problems import FIXTURE, run_solution_here
from tests.test_agents_offline import judge_cli

TOL = Tolerance(1e-5, 1e-5, 1.0)


class FakeClock:
    """A clock that each way advances by its own cost when it runs, so the timings are known."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _ways(clock: FakeClock, costs: dict[str, float], fns: dict[str, object]) -> list[Way]:
    def timed(name):
        def call(args):
            clock.now += costs[name]
            return fns[name](*args)

        return call

    return [Way(name, timed(name)) for name in costs]


def _tuned(ways, clock, margin=0.03) -> Tuned:
    return Tuned(ways, n_inputs=1, dps=False, tolerance=TOL, signature=replay._signature, clock=clock, margin=margin)


def test_each_signature_gets_the_fastest_way_and_a_tie_keeps_the_reference():
    clock = FakeClock()
    costs = {"eager": 2.0, "compile": 1.0}
    tuned = _tuned(_ways(clock, costs, {"eager": lambda x: x * 2, "compile": lambda x: x + x}), clock)
    small, large = torch.ones(3), torch.ones(300)
    assert torch.equal(tuned((small,)), small * 2)
    assert tuned.picks[replay._signature((small,))] == 1
    assert tuned.measured[replay._signature((small,))] == {"eager": 2000.0, "compile": 1000.0}
    costs["compile"] = 1.99  # within the margin of the reference's way: the reference's numerics stay
    tuned((large,))
    assert tuned.picks[replay._signature((large,))] == 0
    # chosen once per signature: later calls run the chosen way only
    before = clock.now
    tuned((small,))
    assert clock.now - before == pytest.approx(costs["compile"])


def test_a_passing_load_falls_on_every_way_alike_and_the_choice_is_told():
    # The two ways cost the same; a load lasting six calls comes just as the timing starts. Timed one way after
    # the other, the first would take all six and lose; taking turns, each takes three of its seven calls and
    # the medians stay what the ways cost, so the reference's way is kept. The choice is told in one line.
    clock, calls, told = FakeClock(), [0], []

    def costly(x):
        calls[0] += 1
        clock.now += 1.0 + (5.0 if 3 <= calls[0] <= 8 else 0.0)  # calls 1 and 2: the reference and the check
        return x * 2

    ways = [Way("eager", lambda args: costly(*args)), Way("compile", lambda args: costly(*args))]
    tuned = Tuned(ways, n_inputs=1, dps=False, tolerance=TOL, signature=replay._signature, clock=clock,
                  report=told.append)  # fmt: skip
    x = torch.ones(4, 2)
    tuned((x,))
    key = replay._signature((x,))
    assert tuned.picks[key] == 0 and tuned.measured[key] == {"eager": 1000.0, "compile": 1000.0}
    assert told == ["solforge tuned [(4, 2)]: keeps eager; eager 1000.0000 ms; compile 1000.0000 ms"]


def test_a_way_that_misses_the_tolerance_or_raises_is_left_out_however_fast():
    clock = FakeClock()

    def broken(x):
        raise RuntimeError("no kernel for this shape")

    costs = {"eager": 5.0, "lossy": 1.0, "broken": 0.5, "good": 3.0}
    fns = {"eager": lambda x: x * 2, "lossy": lambda x: x * 2 + 1e-3, "broken": broken, "good": lambda x: 2 * x}
    tuned = _tuned(_ways(clock, costs, fns), clock)
    x = torch.randn(16)
    assert torch.equal(tuned((x,)), x * 2)
    key = replay._signature((x,))
    assert tuned.picks[key] == 3
    notes = tuned.measured[key]
    assert "0.0000% within" in notes["lossy"] and "RuntimeError: no kernel" in notes["broken"]


def test_a_reference_that_writes_its_inputs_or_draws_random_numbers_returns_what_one_call_would():
    clock = FakeClock()

    def mutating(x):  # writes into its input, then draws noise: both must look as one call would leave them
        x.add_(1)
        return x * 2 + torch.rand(x.shape)

    tuned = _tuned(_ways(clock, {"eager": 1.0, "other": 1.0}, {"eager": mutating, "other": mutating}), clock)
    x = torch.zeros(8)
    torch.manual_seed(5)
    got = tuned((x,))
    torch.manual_seed(5)
    want = mutating(torch.zeros(8))
    assert torch.equal(got, want) and torch.equal(x, torch.ones(8))


def test_agrees_uses_the_judges_rule():
    want = [torch.tensor([1.0, 100.0])]
    assert agrees([torch.tensor([1.0, 100.5])], want, Tolerance(0.0, 0.01, 1.0)) is None  # rtol scales |want|
    assert "50.0000% within" in agrees([torch.tensor([1.5, 100.0])], want, Tolerance(0.1, 0.0, 1.0))
    assert agrees([torch.tensor([1.5, 100.0])], want, Tolerance(0.1, 0.0, 0.5)) is None
    assert "torch.int64" in agrees([torch.tensor([1, 100])], want, TOL)
    assert "2 outputs" in agrees(want * 2, want, TOL)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device")])])
def test_agrees_on_equal_outputs_at_a_size_where_a_reciprocal_mean_falls_short(device):
    # In double, 49 * fl(1/49) < 1: a share taken as a CUDA mean refused a way that matched bit for bit.
    assert 49 * (1.0 / 49) < 1.0
    want = [torch.arange(49, dtype=torch.int64, device=device)]
    assert agrees([want[0].clone()], want, Tolerance(0.0, 0.0, 1.0)) is None
    assert "97.9592% within" in agrees([want[0] + (want[0] == 3)], want, Tolerance(0.0, 0.0, 1.0))


def test_agrees_counts_every_chunk_of_a_large_output(monkeypatch):
    """Outputs are compared a chunk at a time (float64 copies of a whole output would take GiBs on the GPU the
    candidate is timed on); a mismatch in the last, partial chunk still counts."""
    from agents.offline import tuned as tuned_module

    monkeypatch.setattr(tuned_module, "AGREE_CHUNK", 4)
    want = [torch.arange(10, dtype=torch.float32).reshape(2, 5)]
    got = want[0].clone()
    got.view(-1)[9] += 1.0
    assert "90.0000% within" in agrees([got], want, Tolerance(0.0, 0.0, 1.0))
    # the output that disagrees is named by its place among the outputs, not by a chunk's offset
    assert agrees([want[0].clone(), got], [want[0], want[0]], Tolerance(0.0, 0.0, 1.0)).startswith("output 1:")
    assert agrees([got], want, Tolerance(0.0, 0.0, 0.9)) is None
    assert agrees([want[0].clone()], want, Tolerance(0.0, 0.0, 1.0)) is None


def test_the_strictest_tolerance_of_the_workloads_is_the_check():
    p = load_problem(FIXTURE)
    tols = [w.tolerance for w in p.workloads]
    atol, rtol, matched = compiled.strictest_tolerance(p)
    assert atol == min(t.max_atol for t in tols) and rtol == min(t.max_rtol for t in tols)
    assert matched == max(t.required_matched_ratio for t in tols)
    # workloads that differ: each bound from the workload strictest in it
    w = p.workloads[0]
    loose = Tol(max_atol=1e-2, max_rtol=1e-3, required_matched_ratio=0.9)
    tight = Tol(max_atol=1e-4, max_rtol=1e-2, required_matched_ratio=0.99)
    mixed = replace(p, workloads=(w.model_copy(update={"tolerance": loose}), w.model_copy(update={"tolerance": tight})))
    assert compiled.strictest_tolerance(mixed) == (1e-4, 1e-3, 0.99)


@pytest.mark.slow
@pytest.mark.parametrize(("gpu", "search"), [(False, False), (True, False), (True, True)],
                         ids=["cpu_ways", "gpu_ways", "gpu_ways_searched"])  # fmt: skip
def test_the_tuned_candidate_matches_the_reference_on_every_workload(gpu, search):
    """Every rendering runs here (off CUDA the graph ways call straight through); Inductor's C++ code compiles."""
    p = load_problem(FIXTURE)
    sol = compiled.tuned_solution(p, gpu, search=search)
    assert sol.spec.destination_passing_style is gpu and len(sol.sources) == 2
    module = run_solution_here(p, sol, calls=2)
    names = [w.name for w in module._ways]
    assert ("graph_of_compile_searched" in names) is search and names[0] == ("graph_of_eager" if gpu else "eager")


def _signature(*ops: str, **counts: int) -> OpSignature:
    return OpSignature(Counter({**{op: 1 for op in ops}, **counts}))


def test_inductor_search_is_planned_where_the_time_is_in_inductors_own_kernels():
    assert compiled.inductor_search_pays(trace_ops(load_problem(FIXTURE)))  # an RMSNorm: a reduction, a few maps
    assert compiled.inductor_search_pays(_signature("amax", "exp", "sub", "sum", "div"))
    assert compiled.inductor_search_pays(_signature("topk", "_softmax"))
    # library kernels carry the time: a GEMM, a convolution, fused attention
    assert not compiled.inductor_search_pays(_signature("t", "mm", "add"))
    assert not compiled.inductor_search_pays(_signature("convolution", "view"))
    assert not compiled.inductor_search_pays(_signature("_scaled_dot_product_flash_attention", "view"))
    # a large graph (compile time grows with every kernel searched), or an unknown one
    assert compiled.inductor_search_pays(_signature(mul=compiled.SEARCH_MAX_OPS))
    assert not compiled.inductor_search_pays(_signature(mul=compiled.SEARCH_MAX_OPS + 1))
    assert not compiled.inductor_search_pays(OpSignature(Counter(), method="none"))


@pytest.mark.slow
def test_the_tuned_candidate_passes_the_judge_on_the_cpu(tmp_path):
    p = load_problem(FIXTURE)
    assert judge_cli(p, compiled.tuned_solution(p, gpu=False), tmp_path) == ["PASSED"] * len(p.workloads)


def test_graphs_of_different_ways_on_the_same_buffers_are_kept_apart():
    helpers = _replay_module()
    x, out = torch.zeros(4), torch.zeros(4)
    assert helpers._graph_key((x, out)) != ("eager", helpers._graph_key((x, out)))
    keys = {tag: (tag, helpers._graph_key((x, out))) for tag in ("eager", "compile")}
    helpers._graphs.update({k: object() for k in keys.values()})
    helpers._forget_graph((x, out), "eager")
    assert list(helpers._graphs) == [keys["compile"]]


def _replay_module():
    module = types.ModuleType("replay_tags_under_test")
    exec(compile(compiled.replay_source(), "replay.py", "exec"), module.__dict__)
    return module



class _GpuLog:
    """Stands in for ``torch.cuda``: logs what the timing queues, in order; a spin of n cycles takes n ns."""

    def __init__(self):
        self.log: list[str] = []
        self.now = 0.0  # ms of GPU time queued so far

    def synchronize(self):
        self.log.append("sync")

    def _sleep(self, cycles):
        self.log.append(f"spin {cycles}")
        self.now += cycles * 1e-6

    def Event(self, enable_timing=False):  # noqa: N802 - torch.cuda's name
        gpu = self

        class _Event:
            def record(self):
                self.at = gpu.now
                gpu.log.append("record")

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return other.at - self.at

        return _Event()


def test_a_way_is_timed_after_a_spin_so_its_host_launch_is_left_out():
    gpu = _GpuLog()
    calls = []
    t = Tuned([Way("only", lambda args: calls.append(gpu.log.copy()))], n_inputs=1, dps=False, tolerance=TOL,
              signature=replay._signature, cuda=gpu, preroll_us=50.0)  # fmt: skip
    t._once(t.ways[0], (torch.zeros(1),), True)
    # calibration at 1 cycle per ns (200000 cycles in 0.2 ms): a 50 µs pre-roll is 50000 cycles
    assert calls[0][-2:] == ["spin 50000", "record"], calls  # the spin is queued before the window opens
    t._once(t.ways[0], (torch.zeros(1),), True)
    assert calls[1][-3:] == ["sync", "spin 50000", "record"] and calls[1].count("spin 20000000") == 1  # measured once
