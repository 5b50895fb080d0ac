"""The exported package's ops composed into one decoder layer of a catalog architecture (the end-to-end check of
``solforge export``): the layer run from the exported winners matches the architecture's whole-layer reference,
the winners (not the fallback references) ran, and a wrong winner is caught."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agents.offline import compiled
from agents.offline.agent import plan
from sol_bench.models import Solution
from sol_bench.problem import Problem
from solforge.export.exporter import export_winners
from solforge.export.model_block import (
    ATTENTION, MLP, NORM, BlockError, BlockProblems, block_problems, check_block, exported_calls, shared_tokens,
)
from solforge.store import ResultStore
from solforge.store import report_queries as rq
from solforge.store.validate import sol_score

SMALL = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
         "intermediate_size": 256, "vocab_size": 512}  # fmt: skip
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parents[1]


def _rmsnorm_template(problem: Problem) -> Solution:
    """The offline agent's own RMSNorm template, rendered in PyTorch: a winner that is not the reference."""
    return next(p.make() for p in plan(problem, "cpu", language="pytorch") if "__rmsnorm_" in p.name)


def _doubled(problem: Problem) -> Solution:
    sol = compiled.solution(problem, compiled.EAGER)
    src = sol.sources[0].content + "\n_solforge_right = solforge_entry\nsolforge_entry = lambda *a: 2 * _solforge_right(*a)\n"
    return sol.model_copy(update={"name": "doubled", "sources": [sol.sources[0].model_copy(update={"content": src})]})


def _campaign(data: Path, winners: dict[str, Solution], problems: BlockProblems, tokens: int) -> None:
    """A run whose only passing candidate per stage is ``winners[stage]``, judged on ``tokens`` tokens."""
    store, cands, traces, rows = ResultStore(data), [], [], []
    for i, (stage, sol) in enumerate(winners.items()):
        p = problems.stages[stage]
        cid = f"c{i}"
        f = rq.solution_file(data, "r1", cid)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(sol.model_dump_json())
        cands.append(dict(run_id="r1", candidate_id=cid, problem=p.name, attempt=0, agent="offline",
                          language="pytorch", model="m", source_hash=cid, tokens_in=0, tokens_out=0, cost_usd=0.0,
                          created_at=T0))  # fmt: skip
        [w] = [w for w in p.workloads if tokens in w.axes.values()]
        traces.append(dict(run_id="r1", candidate_id=cid, problem=p.name, workload_uuid=w.uuid, status="PASSED",
                           device="cpu", judge_s=1.0, latency_ms=1.0, eager_ms=2.0, t_b_ms=2.0, t_sol_ms=0.1,
                           speedup=2.0, speedup_vs_eager=2.0, sol_score=sol_score(1.0, 2.0, 0.1)))  # fmt: skip
        rows.append(dict(run_id="r1", problem=p.name, path=str(p.path), op_type=stage, workloads=len(p.workloads)))
    assert store.append("candidates", cands).ok and store.append("traces", traces).ok
    assert store.append("problems", rows).ok


@pytest.fixture(autouse=True)
def _no_package_loaded(monkeypatch, tmp_path):
    """Each test imports its own exported package; none is left for the next test (or test module) to find:
    not its modules, nor the kernel folders it put on ``sys.path`` (the judge would take a winner's ``kernel.py``
    found there for an installed module it shadows)."""

    def drop() -> None:
        for name, module in list(sys.modules.items()):
            origin = str(getattr(module, "__file__", "") or "")
            if name == "solforge_kernels" or name.startswith("solforge_kernels.") or origin.startswith(str(tmp_path)):
                del sys.modules[name]

    monkeypatch.setattr(sys, "path", list(sys.path))
    drop()
    yield
    drop()


@pytest.fixture(scope="module")
def layer(tmp_path_factory) -> BlockProblems:
    return block_problems("qwen2.5-0.5b", tmp_path_factory.mktemp("problems"), SMALL, dtype="fp32")


def _export(tmp_path: Path, layer: BlockProblems, winners: dict[str, Solution], tokens: int) -> Path:
    data, out = tmp_path / "data", tmp_path / "export"
    _campaign(data, winners, layer, tokens)
    result = export_winners(data, out)
    assert not result.skipped and {e.problem for e in result.exported} == {layer.stages[s].name for s in winners}
    return out


@pytest.mark.slow
def test_exported_winners_compose_into_the_layer_and_run(layer, tmp_path):
    tokens = shared_tokens(layer)[0]
    assert tokens > 1  # a token count every stage and the layer were cut with
    winners = {NORM: _rmsnorm_template(layer.stages[NORM]),
               MLP: compiled.solution(layer.stages[MLP], compiled.EAGER)}  # fmt: skip
    assert "__rmsnorm_" in winners[NORM].name
    check = check_block(layer, _export(tmp_path, layer, winners, tokens), tokens, iterations=3)
    assert check.reference_matches and check.exported_matches, check.reason
    assert check.exported.exported == (MLP, NORM) and ATTENTION not in check.exported.kernel_calls
    assert check.exported.kernel_calls == {NORM: 2, MLP: 1}  # both norms and the MLP ran the winners
    assert check.reference.latency_ms > 0 and check.exported.latency_ms > 0
    assert check.exported_max_abs_err < 1e-3


@pytest.mark.slow
def test_a_wrong_winner_fails_the_layer_check_in_the_bench(layer, tmp_path):
    """bench/model_block.py (a fresh process: one package's ops per process) reports the mismatch and exits 1."""
    tokens = shared_tokens(layer)[0]
    out = _export(tmp_path, layer, {MLP: _doubled(layer.stages[MLP])}, tokens)
    config = [x for k, v in SMALL.items() for x in ("--config", f"{k}={v}")]
    res = subprocess.run([sys.executable, "bench/model_block.py", "qwen2.5-0.5b", *config, "--dtype", "fp32",
                          "--export", str(out), "--tokens", str(tokens), "--device", "cpu", "--iterations", "1"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)  # fmt: skip
    assert res.returncode == 1, res.stderr[-2000:]
    row = next(line for line in res.stdout.splitlines() if line.startswith(f"| {tokens} |"))
    assert "| mlp_block | mlp_block 1 |" in row and "no: exported: output 'y'" in row


def test_a_second_package_in_one_process_is_refused(layer, tmp_path, monkeypatch):
    import types

    other = tmp_path / "other" / "solforge_kernels"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("OPS = {}\n")
    loaded = types.ModuleType("solforge_kernels")
    loaded.__file__ = str(tmp_path / "first" / "solforge_kernels" / "__init__.py")
    monkeypatch.setitem(sys.modules, "solforge_kernels", loaded)
    with pytest.raises(BlockError, match="already loaded in this process"):
        exported_calls(layer, tmp_path / "other")
