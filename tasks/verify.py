"""verify: judge a candidate on a GPU worker, in the judge's own process.

The judge checks correctness and times each workload in one isolated process (it also verifies the
outputs of timed runs), so this one call yields both the verdict and the timings. A verdict is final and
never retried; only the judge's own failure (exit 3) is retried, once. A compile error found on the CPU
worker is reported without spending device time.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from sol_bench.models import Environment, Evaluation, Status, Trace
from sol_bench.problem import load_problem
from solforge.judge_client import JudgeInternalError, JudgeOptions, JudgeRun, run_judge
from solforge.judge_server import worker_servers

from .common import Compiled


def _judge_failed(task: object, task_run: object, state: object) -> bool:
    return isinstance(state.result(raise_on_failure=False), JudgeInternalError)  # type: ignore[attr-defined]


@task(name="verify", retries=1, retry_delay_seconds=2, retry_condition_fn=_judge_failed, cache_policy=NO_CACHE)
def verify(problem_dir: str, compiled: Compiled | None, options: JudgeOptions) -> JudgeRun | None:
    if compiled is None:
        return None
    problem = load_problem(problem_dir)
    if compiled.error is not None:
        traces = tuple(
            Trace(
                definition=problem.name,
                solution=compiled.solution.name,
                workload=w,
                evaluation=Evaluation(
                    status=Status.COMPILE_ERROR,
                    reason=compiled.error,
                    log=compiled.error,
                    environment=Environment(hardware=options.device),
                    device=options.device,
                ),
            )
            for w in problem.workloads
        )
        return JudgeRun(traces=traces, returncode=1, wall_s=0.0)
    return run_judge(problem, compiled.solution, options, worker_servers())
