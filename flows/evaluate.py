"""On-demand evaluation: judge one solution file on one problem and store the verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from agents.base import Candidate
from sol_bench.problem import load_problem, load_solution
from solforge.judge_client import JudgeOptions
from solforge.store import ResultStore, check_run_id
from solforge.store.rows import candidate_id
from tasks.common import Generated
from tasks.compile import compile_candidate
from tasks.score import score
from tasks.store import store_candidate, store_traces
from tasks.verify import verify

from .campaign import new_run_id
from .runtime import dask_runtime, gpu
from .runtime import data_dir as resolve_data_dir


@flow(name="evaluate-solution")
def _evaluate_on(run_id: str, store_dir: str, problem_dir: str, solution_file: str, options: JudgeOptions) -> list[dict[str, Any]]:
    problem = load_problem(problem_dir)
    solution = load_solution(Path(solution_file))
    cid = candidate_id(run_id, problem.name, 0)
    gen = Generated(candidate=Candidate(solution=solution, agent="user", language=solution.spec.languages[0].value), seconds=0.0)
    sc = store_candidate.submit(store_dir, run_id, cid, problem.name, 0, gen)
    c = compile_candidate.submit(solution)
    with gpu():
        v = verify.submit(problem_dir, c, options)
    s = score.submit(run_id, cid, problem.name, c, v, options.device)
    store_traces.submit(store_dir, s, wait_for=[sc]).result()
    return s.result().rows


@flow(name="evaluate")
def evaluate(
    problem_dir: str,
    solution_file: str,
    device: str = "auto",
    data_dir: str | None = None,
    run_id: str | None = None,
    dask_address: str | None = None,
    timeout_s: float = 60.0,
) -> list[dict[str, Any]]:
    """Judge ``solution_file`` on ``problem_dir``; returns the stored trace rows."""
    store_dir = resolve_data_dir(data_dir)
    ResultStore(store_dir).ensure_layout()
    run_id = check_run_id(run_id or "eval-" + new_run_id())
    with dask_runtime(device, dask_address) as rt:
        return _evaluate_on.with_options(task_runner=rt.task_runner())(
            run_id, str(store_dir), problem_dir, solution_file, JudgeOptions(device=rt.device, timeout_s=timeout_s, worker_devices=rt.devices)
        )
