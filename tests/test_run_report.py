"""The run's report table: the bare eager reference is no result (its "speedup" is timing the same code twice),
so a problem where it alone passed says so and scores as unsolved; any other passing candidate is the result."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from flows.report import markdown
from sol_bench.score import sol_score
from solforge.store import ResultStore
from solforge.store.report_queries import solution_file
from solforge.store.stats import aggregates, problem_results


def _candidate(store: ResultStore, data, problem: str, attempt: int, solution: dict, speedup: float) -> None:
    now, cid = datetime.now(timezone.utc), f"c{attempt:04d}-{problem}"
    path = solution_file(data, "r", cid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(solution))
    store.append("candidates", [{"run_id": "r", "candidate_id": cid, "problem": problem, "attempt": attempt,
                                 "agent": "offline", "language": "pytorch", "source_hash": "h", "tokens_in": 0,
                                 "tokens_out": 0, "cost_usd": 0.0, "created_at": now}])  # fmt: skip
    score = sol_score(1.0, speedup, 0.5)  # T_k 1 ms, T_b (eager) ``speedup`` ms, T_SOL 0.5 ms
    written = store.append("traces", [{"run_id": "r", "candidate_id": cid, "problem": problem, "workload_uuid": "w0",
                                       "status": "PASSED", "latency_ms": 1.0, "eager_ms": speedup, "t_b_ms": speedup,
                                       "t_sol_ms": 0.5, "speedup": speedup, "speedup_vs_eager": speedup,
                                       "sol_score": score.sol_score, "device": "cpu", "created_at": now}])  # fmt: skip
    assert written.written == 1, written.report


def test_the_bare_reference_is_no_result_and_another_passing_candidate_is(tmp_path):
    data = tmp_path / "data"
    store = ResultStore(data)
    _candidate(store, data, "only_ref", 0, {"name": "only_ref__ref_eager", "author": "solforge-offline-compiled"}, 1.4)
    _candidate(store, data, "by_agent", 0, {"name": "x", "author": "solforge-reference"}, 2.5)
    _candidate(store, data, "mixed", 0, {"name": "mixed__ref_eager", "author": "solforge-offline-compiled"}, 1.9)
    _candidate(store, data, "mixed", 1, {"name": "mixed__ref_inductor_cpu", "author": "solforge-offline-compiled"}, 1.2)

    results = {r.problem: r for r in problem_results(data, "r")}
    assert results["only_ref"].reference_only and results["only_ref"].best_speedup is None
    assert results["by_agent"].reference_only and results["by_agent"].best_sol_score is None
    assert not results["mixed"].reference_only and results["mixed"].best_speedup == 1.2  # not the reference's 1.9
    assert results["mixed"].passed == 2
    agg = aggregates(list(results.values()))
    assert agg["solved"] == 1 and abs(agg["geomean_speedup"] - 1.2 ** (1 / 3)) < 1e-9
    text = markdown("r", [vars(r) for r in results.values()], agg)
    assert "| only_ref | 1 | 1 | only the eager reference passed |" in text
