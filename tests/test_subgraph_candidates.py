"""The candidates that carry the families (``agents/offline/subgraph``) as the judge's worker loads them: the
subgraph candidate and the tuned reference with the families' way ship the package beside their entry and
compute the reference's outputs (run here on the CPU)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from agents.offline.agent import plan
from agents.offline.subgraph import solution as subgraph_solution
from sol_bench.inputs import make_inputs, output_specs
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference
from tests.test_subgraph_families import write_block


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    return load_problem(write_block(tmp_path_factory.mktemp("block")))


@contextlib.contextmanager
def _candidate_module(sol, where: Path, name: str):
    """The candidate's ``kernel.py`` imported with its shipped files beside it, as the judge's worker does; the
    shipped package is forgotten afterwards, so another candidate imports its own."""
    for s in sol.sources:
        (where / s.path).parent.mkdir(parents=True, exist_ok=True)
        (where / s.path).write_text(s.content)
    sys.path.append(str(where))
    try:
        spec = importlib.util.spec_from_file_location(name, where / "kernel.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(where))
        for mod in [m for m in sys.modules if m == "sf_subgraph" or m.startswith("sf_subgraph.")]:
            del sys.modules[mod]


def test_candidate_ships_package_files_and_runs_on_the_cpu(block, tmp_path):
    found = subgraph_solution.find(block)
    assert found.families == ("attention", "gated", "gemv", "rmsnorm")
    sol = subgraph_solution.solution(block, found)
    here = Path(subgraph_solution.__file__).parent
    shipped = {s.path: s.content for s in sol.sources if s.path != "kernel.py"}
    assert "sf_subgraph/families/rmsnorm/kernel.py" in shipped and "sf_subgraph/solution.py" not in shipped
    for path, text in shipped.items():
        assert (here / path.removeprefix("sf_subgraph/")).read_text() == text  # the package's own files
    with _candidate_module(sol, tmp_path, "subgraph_candidate") as module:
        ref = load_reference(block.definition)
        for w in block.workloads:
            inputs = list(make_inputs(block.definition, w, "cpu", seed=5, reference=ref).values())
            outs = [torch.empty(shape, dtype=dt) for shape, dt in output_specs(block.definition, w).values()]
            module.solforge_entry(*inputs, *outs)
            for got, want in zip(outs, ref.run(*inputs)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert all(len(r) == 8 for r in module._runner.replaced.values())  # found again at run time, per signature


def test_the_tuned_candidate_carries_the_families_as_one_of_its_ways(block, tmp_path):
    """On a GPU the tuned candidate (planned first) also runs the reference with its families replaced, as one
    more way chosen per signature where it agrees and is fastest: families then reach every problem they are
    found in, not only where the separate subgraph candidate is judged. The way computes the reference's outputs
    (run here on the CPU); without families found, the candidate is as before."""
    from agents.offline import compiled

    first = next(iter(plan(block, "cuda")))
    assert first.group == "reference/tuned" and "attention+gated+gemv+rmsnorm replaced" in first.notes
    paths = {s.path for s in first.solution.sources}
    assert {"kernel.py", "solforge_tuned.py", "sf_subgraph/runtime.py"} <= paths
    plain = compiled.tuned_solution(block, True)
    assert {s.path for s in plain.sources} == {"kernel.py", "solforge_tuned.py"}
    assert "graph_of_families" not in plain.sources[0].content
    with _candidate_module(first.solution, tmp_path, "tuned_candidate") as module:
        assert [w.name for w in module._ways] == ["graph_of_eager", "graph_of_compile", "compile", "graph_of_families"]
        ref = load_reference(block.definition)
        w = block.workloads[0]
        inputs = list(make_inputs(block.definition, w, "cpu", seed=3, reference=ref).values())
        outs = [torch.empty(shape, dtype=dt) for shape, dt in output_specs(block.definition, w).values()]
        module._ways[-1].call((*inputs, *outs))
        for got, want in zip(outs, ref.run(*inputs)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert [len(r) for r in module._families.replaced.values()] == [8]
