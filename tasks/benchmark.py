"""benchmark: measure the eager baseline T_b of a problem on a GPU worker (judging its own reference)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from sol_bench.models import Status
from sol_bench.problem import load_problem
from solforge.judge_client import JudgeOptions, run_judge
from solforge.reference_agent import reference_solution


@task(name="benchmark", cache_policy=NO_CACHE)
def benchmark_baseline(run_id: str, problem_dir: str, options: JudgeOptions) -> list[dict[str, Any]]:
    """Rows for the ``baselines`` table, one per workload (kind 'eager')."""
    problem = load_problem(problem_dir)
    run = run_judge(problem, reference_solution(problem.definition), options)
    rows = []
    for t in run.traces:
        ev = t.evaluation
        passed = ev.status is Status.PASSED and ev.performance is not None
        rows.append({
            "run_id": run_id,
            "problem": problem.name,
            "workload_uuid": t.workload.uuid,
            "kind": "eager",
            "device": options.device,
            "status": ev.status.value,
            "latency_ms": ev.performance.latency_ms if passed else None,
            "t_sol_ms": ev.t_sol_ms if ev.t_sol_ms and ev.t_sol_ms > 0 else None,
        })
    return rows
