"""score: turn the judge's traces into result rows (speedups, SOL score) and the agent's feedback."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from agents.base import AttemptFeedback
from solforge.judge_client import JudgeRun
from solforge.store.rows import feedback, trace_rows

from .common import Compiled, Scored


@task(name="score", cache_policy=NO_CACHE)
def score(
    run_id: str,
    candidate_id: str,
    problem: str,
    compiled: Compiled | None,
    judged: JudgeRun | None,
    device: str,
    t_b_ms: dict[str, float] | None = None,
) -> Scored:
    if compiled is None or judged is None:
        return Scored(candidate_id=candidate_id)
    n = max(1, len(judged.traces))
    rows = trace_rows(
        run_id, candidate_id, problem, judged.traces, device=device, judge_s=judged.wall_s / n, t_b_ms=t_b_ms
    )
    logs = {t.workload.uuid: t.evaluation.log for t in judged.traces}
    fb = AttemptFeedback(candidate_id=candidate_id, solution=compiled.solution, workloads=feedback(rows, logs))
    return Scored(candidate_id=candidate_id, rows=rows, feedback=fb, judge=judged)
