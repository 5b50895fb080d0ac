"""The campaign: rounds of attempts over many problems, reallocated by the rule-based planner.

After every round the planner reads the results tables (DuckDB) and decides each problem's attempts for
the next round; every decision is stored with its reason in ``decisions``. A run stops when its
candidate cap, time or money budget is spent, or when the planner stops every problem.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from agents.base import ProblemStats
from sol_bench.problem import find_problems, load_problem
from solforge.agent_spec import AgentSpec
from solforge.judge_client import JudgeOptions, restrict
from solforge.planning.rules import RulePlanner
from solforge.store import ResultStore, check_run_id
from solforge.store.query import connect
from solforge.store.stats import problem_stats
from tasks.benchmark import benchmark_baseline
from tasks.store import store_rows

from .optimize import collect, load_states, submit_attempts, submit_rejudge
from .report import report
from .runtime import artifact_key, dask_runtime, gpu
from .runtime import data_dir as resolve_data_dir

DEFAULT_PROBLEMS = "data/problems"


class CampaignConfig(BaseModel):
    run_id: str
    data_dir: str
    problem_dirs: list[str]
    agent: AgentSpec = AgentSpec()
    max_candidates: int = Field(ge=0)
    budget_minutes: float | None = None
    budget_usd: float | None = None
    timeout_s: float = 60.0
    iterations: int | None = None
    max_workloads: int | None = None  # None: the device's default (JudgeOptions.cpu_limits)
    max_workload_mib: float | None = None
    measure_baseline: bool = False
    show_progress: bool = False


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def expand_problems(paths: list[str] | None) -> list[str]:
    roots = paths or [DEFAULT_PROBLEMS]
    out: list[str] = []
    for r in roots:
        out += [str(p) for p in find_problems(Path(r))]
    return sorted(dict.fromkeys(out))


class _Progress:
    """A one-line progress bar on stderr (only when asked for)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            frac = min(1.0, self.done / max(1, self.total))
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {time.monotonic() - self.t0:5.0f}s {label[:40]:<40}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def baseline_times(store_dir: str, problem: str, device: str) -> dict[str, float]:
    """Workload uuid -> the latest T_b measured for ``problem`` on ``device`` (empty: eager stands in)."""
    con = connect(store_dir)
    try:
        rows = con.sql(
            "SELECT workload_uuid, arg_max(latency_ms, created_at) AS t_b FROM baselines "
            "WHERE problem = ? AND device = ? AND kind = 't_b' AND status = 'PASSED' GROUP BY 1",
            params=[problem, device],
        ).fetchall()
    finally:
        con.close()
    return {uuid: t_b for uuid, t_b in rows if t_b}


def _stored_count(store_dir: str, run_id: str) -> tuple[int, float, int]:
    con = connect(store_dir)
    try:
        n, usd = con.sql(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM candidates WHERE run_id = ?", params=[run_id]
        ).fetchall()[0]
        last = con.sql("SELECT coalesce(max(round), -1) FROM decisions WHERE run_id = ?", params=[run_id]).fetchall()[0][0]
    finally:
        con.close()
    return int(n), float(usd), int(last)


@flow(name="campaign-rounds")
def campaign_rounds(
    cfg: CampaignConfig, device: str, gpu_slots: int, worker_devices: dict[str, str] | None = None
) -> dict[str, Any]:
    t_start = time.monotonic()
    store = ResultStore(cfg.data_dir)
    limits = JudgeOptions.cpu_limits(device)
    if cfg.max_workloads is not None:
        limits["max_workloads"] = cfg.max_workloads
    if cfg.max_workload_mib is not None:
        limits["max_workload_bytes"] = int(cfg.max_workload_mib * (1 << 20))
    all_problems = [load_problem(p) for p in cfg.problem_dirs]
    allowed = JudgeOptions(**limits)
    problems = [r for r in (restrict(p, allowed) for p in all_problems) if r is not None]
    if len(problems) < len(all_problems):
        logger = get_run_logger()
        logger.info(f"{len(all_problems) - len(problems)} of {len(all_problems)} problems have no workload within the "
                    f"limits on {device} ({limits}); they are left out of this run")
    if not problems:
        raise ValueError(f"no problem has a workload within the limits on {device}: {limits}")
    store.append("problems", [
        {"run_id": cfg.run_id, "problem": p.name, "path": str(p.path), "op_type": p.definition.op_type,
         "workloads": len(p.workloads)}
        for p in problems
    ])
    options = JudgeOptions(
        device=device, timeout_s=cfg.timeout_s, iterations=cfg.iterations,
        staging_root=str(Path(cfg.data_dir).resolve() / "kernels_tmp"), worker_devices=worker_devices or {},
        **limits,
    )
    states = load_states(Path(cfg.data_dir), cfg.run_id, problems)
    if cfg.measure_baseline:
        missing = [p for p in problems if not baseline_times(cfg.data_dir, p.name, device)]
        measured = []
        for p in missing:
            with gpu():
                rows = benchmark_baseline.submit(cfg.run_id, str(p.path), cfg.data_dir, options)
            measured.append(store_rows.submit(cfg.data_dir, "baselines", rows))
        for f in measured:
            f.result()
    for st in states.values():
        st.t_b_ms = baseline_times(cfg.data_dir, st.problem.name, device)
    stored, spent, last_round = _stored_count(cfg.data_dir, cfg.run_id)
    progress = _Progress(cfg.max_candidates, cfg.show_progress)
    progress.done = stored - sum(len(s.pending) for s in states.values())

    pending = [submit_rejudge(cfg.run_id, st, cid, sol, options) for st in states.values() for cid, sol in st.pending]
    for _ in collect(store, cfg.run_id, pending):
        progress.step("resumed")

    planner = RulePlanner()
    rnd = last_round + 1
    last_counts: dict[str, int] = {}
    stop_reason = "candidate cap reached"
    before: int | None = None  # candidates stored before the last round
    while True:
        stored, spent, _ = _stored_count(cfg.data_dir, cfg.run_id)
        if stored == before:
            stop_reason = "agents have nothing more to try"
            break
        remaining = cfg.max_candidates - stored
        if remaining <= 0:
            break
        if cfg.budget_minutes is not None and (time.monotonic() - t_start) / 60 >= cfg.budget_minutes:
            stop_reason = "time budget spent"
            break
        if cfg.budget_usd is not None and spent >= cfg.budget_usd:
            stop_reason = "money budget spent"
            break
        known = {s.problem: s for s in problem_stats(cfg.data_dir, cfg.run_id, last_counts)}
        stats = [
            known.get(p.name) or ProblemStats(p.name, 0, None, None, 0.0, 0, 0.0, 0.0) for p in problems
        ]
        slots = min(remaining, max(len(problems), 2 * gpu_slots))
        alloc = planner.allocate(stats, slots)
        store.append("decisions", [
            {"run_id": cfg.run_id, "round": rnd, "problem": s.problem, "attempts": alloc.attempts.get(s.problem, 0),
             "stopped": s.problem in alloc.stopped,
             "headroom": None if s.best_sol_score is None else 1.0 - s.best_sol_score,
             "reason": alloc.reasons.get(s.problem, "no slot this round")}
            for s in stats
        ])
        if sum(alloc.attempts.values()) == 0:
            stop_reason = "planner stopped every problem"
            break
        submitted = []
        for name, n in alloc.attempts.items():
            if n > 0:
                submitted += submit_attempts(cfg.run_id, states[name], n, cfg.agent, options)
        for _ in collect(store, cfg.run_id, submitted):
            progress.step(f"round {rnd}")
        last_counts = dict(alloc.attempts)
        create_markdown_artifact(
            key=artifact_key("progress", cfg.run_id),
            markdown=f"round {rnd}: {len(submitted)} attempts submitted; planner: "
            + "; ".join(f"{p}: {r}" for p, r in alloc.reasons.items()),
        )
        before = stored
        rnd += 1
    progress.close()
    return {"stop_reason": stop_reason, "wall_s": time.monotonic() - t_start}


@flow(name="campaign")
def campaign(
    problems: list[str] | None = None,
    agent: str = "offline",
    language: str | None = None,
    model: str | None = None,
    api_base: str | None = None,
    device: str = "auto",
    max_candidates: int | None = None,
    budget_minutes: float | None = None,
    budget_usd: float | None = None,
    dask_address: str | None = None,
    data_dir: str | None = None,
    run_id: str | None = None,
    timeout_s: float = 60.0,
    iterations: int | None = None,
    measure_baseline: bool = False,
    show_progress: bool = False,
    max_workloads: int | None = None,
    max_workload_mib: float | None = None,
) -> dict[str, Any]:
    """Optimize many problems under the planner; returns the report (table + aggregates)."""
    store_dir = resolve_data_dir(data_dir)
    run_id = check_run_id(run_id or new_run_id())
    dirs = expand_problems(problems)
    if not dirs:
        raise ValueError(f"no problem directories under {problems or [DEFAULT_PROBLEMS]}")
    cfg = CampaignConfig(
        run_id=run_id, data_dir=str(store_dir), problem_dirs=dirs,
        agent=AgentSpec(kind=agent, language=language, model=model, api_base=api_base, budget_usd=budget_usd),
        max_candidates=max_candidates if max_candidates is not None else 3 * len(dirs),
        budget_minutes=budget_minutes, budget_usd=budget_usd, timeout_s=timeout_s, iterations=iterations,
        measure_baseline=measure_baseline, show_progress=show_progress, max_workloads=max_workloads,
        max_workload_mib=max_workload_mib,
    )
    store = ResultStore(store_dir)
    store.ensure_layout()
    t0 = time.monotonic()
    with dask_runtime(device, dask_address) as rt:
        store.append("runs", [{"run_id": run_id, "event": "start", "agent": agent, "language": language,
                               "model": model, "device": rt.device, "problems": len(dirs),
                               "max_candidates": cfg.max_candidates, "budget_minutes": budget_minutes,
                               "budget_usd": budget_usd}])
        outcome = campaign_rounds.with_options(task_runner=rt.task_runner())(cfg, rt.device, rt.gpu_slots, rt.devices)
    store.append("runs", [{"run_id": run_id, "event": "end", "device": rt.device, "problems": len(dirs),
                           "wall_s": time.monotonic() - t0}])
    out = report(run_id, str(store_dir))
    return out | outcome
