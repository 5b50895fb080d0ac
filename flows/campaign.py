"""The campaign: attempts over many problems, allocated by a planner (rules or an LLM), with no round barrier.

About two attempts per device slot are in flight (one judged, one built); as each verdict is stored the next attempt is
submitted from the planner's current allocation (solforge/planning/window.py). When that allocation cannot fill a
free slot, the planner reads the results tables (DuckDB) again and re-allocates; each of its runs is a
``round`` of the ``decisions`` table, every decision stored with its reason. A run stops starting attempts
when its time or money budget is spent or when no problem is left: each stops when it reaches the
candidate cap (per problem), when the planner stops it, when the agent has nothing more to try or when the
agent failed on it. The run ends when the attempts in flight are stored.

Under a money budget the paid calls (an agent's proposal, the LLM planner's allocation) go one at a time,
each only after the spend so far (failed calls included) is stored and found under the budget: a run never
passes ``budget_usd`` by more than one call. Each proposal's agent is told what is left of the budget.

Problems' histories start with what earlier runs in the data dir judged (``flows.optimize.load_states``).

One problem's failure never ends the run: a problem directory that does not load is reported (file and
field) and left out, an agent error or a judge failure becomes a ``failures`` row (``flows/optimize.py``),
and so does a baseline that cannot be measured.
"""

from __future__ import annotations

import queue
import sys
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from sol_bench.errors import InputError
from sol_bench.problem import Problem, find_problems, load_problem
from solforge.agent_spec import AgentSpec
from solforge.judge_client import JudgeOptions, restrict
from solforge.planning.factory import PlannerKind, make_planner
from solforge.planning.types import Allocation, ProblemStats
from solforge.planning.window import Window
from solforge.store import ResultStore, check_run_id
from solforge.store.campaign_queries import baseline_times, run_totals
from solforge.store.stats import problem_stats
from tasks.benchmark import benchmark_baseline
from tasks.generate import describe
from tasks.store import failure_row, store_failures

from .optimize import (
    Attempt, ProblemState, collect, load_states, store_prepared, store_verdict, submit_attempts, submit_rejudge,
)  # fmt: skip
from .report import report
from .runtime import artifact_key, dask_runtime, gpu
from .runtime import data_dir as resolve_data_dir

DEFAULT_PROBLEMS = "data/problems"
DEFAULT_CANDIDATES_PER_PROBLEM = 3
CAP_REACHED = "candidate cap reached"
NOTHING_MORE = "agent has nothing more to try"


class CampaignConfig(BaseModel):
    run_id: str
    data_dir: str
    problem_dirs: list[str]
    agent: AgentSpec = AgentSpec()
    max_candidates: int = Field(ge=0, description="Attempts per problem at most (failed ones included).")
    budget_minutes: float | None = None
    budget_usd: float | None = None
    timeout_s: float = 60.0
    iterations: int | None = None
    max_workloads: int | None = None  # None: the device's default (JudgeOptions.cpu_limits)
    max_workload_mib: float | None = None
    measure_baseline: bool = False
    show_progress: bool = False
    planner: PlannerKind = "rules"
    planner_model: str | None = None  # litellm model of the LLM planner (default: the agents' model)
    planner_api_base: str | None = None


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


@dataclass(frozen=True)
class Skipped:
    """A problem directory left out of the run, and why (the loader's message names file and field)."""

    path: str
    reason: str


def load_problems(dirs: list[str]) -> tuple[list[Problem], list[Skipped]]:
    """Every problem that loads; the others with their error, never raised."""
    problems, skipped = [], []
    for d in dirs:
        try:
            problems.append(load_problem(Path(d)))
        except Exception as e:  # noqa: BLE001 - an invalid problem is reported and left out, the rest run
            skipped.append(Skipped(d, str(e) if isinstance(e, InputError) else describe(e)))
    return problems, skipped


class _Rolling:
    """The campaign's loop: keep ``2 x gpu_slots`` attempts in flight, store each result as it arrives and
    submit the next attempt at once; the planner re-allocates whenever the current allocation cannot fill
    a free slot (see solforge/planning/window.py). Each planner run is a ``round`` of the decisions table."""

    def __init__(
        self, cfg: CampaignConfig, store: ResultStore, states: dict[str, ProblemState], problems: list[Problem],
        options: JudgeOptions, gpu_slots: int, progress: _Progress, stored: int, first_round: int, spent: float,
    ) -> None:
        self.cfg, self.store, self.states, self.problems, self.options = cfg, store, states, problems, options
        self.gpu_slots, self.progress = gpu_slots, progress
        # per slot one attempt judging and one built and waiting: storing a verdict and building the next
        # attempt can take longer than the gap between verdicts (bench/bench_scheduling.py: 2 slots at 80%
        # occupancy with slots + 1, 89% with 2 x slots)
        self.window = Window(size=2 * gpu_slots)
        self.planner = make_planner(cfg.planner, cfg.planner_model or cfg.agent.model,
                                    cfg.planner_api_base or cfg.agent.api_base)
        self.spent = spent  # USD of this run: stored candidates, failed attempts and planner calls
        self.rnd = first_round
        self.stored = stored  # candidate rows of this run
        self.stop: str | None = None  # why no more attempts are started
        self.done: dict[str, str] = {}  # problem -> why it gets no more attempts (cap, agent done or failed)
        self.last_stats: dict[str, ProblemStats] = {}
        self.events: queue.Queue[tuple[Attempt, bool]] = queue.Queue()
        self.unstored: dict[str, Attempt] = {}
        self.made: dict[str, bool] = {}  # candidate id -> whether its prepare made a candidate

    def run(self, t_start: float) -> str:
        while True:
            self.fill(t_start)
            if self.window.busy() == 0:
                break
            a, is_verdict = self.events.get()
            self.handle(a, is_verdict)
        return self.stop or self.why_done()

    def why_done(self) -> str:
        if self.done and all(r.startswith(CAP_REACHED) for r in self.done.values()):
            return CAP_REACHED
        if self.done and all(r == NOTHING_MORE for r in self.done.values()):
            return "agents have nothing more to try"
        return "every problem is done (cap reached, nothing more to try or the agent failed)"

    def retire(self, problem: str, reason: str) -> None:
        """No more attempts for ``problem``."""
        self.done.setdefault(problem, reason)
        self.window.exhausted.add(problem)

    def capped(self, problem: str) -> bool:
        if self.states[problem].next_attempt < self.cfg.max_candidates:
            return False
        self.retire(problem, f"{CAP_REACHED} ({self.cfg.max_candidates} per problem)")
        return True

    def money_left(self) -> float | None:
        return None if self.cfg.budget_usd is None else self.cfg.budget_usd - self.spent

    def fill(self, t_start: float) -> None:
        cfg = self.cfg
        while self.stop is None and self.window.has_room():
            if cfg.budget_minutes is not None and (time.monotonic() - t_start) / 60 >= cfg.budget_minutes:
                self.stop = "time budget spent"
                return
            left = self.money_left()
            if left is not None:
                if self.unstored:  # a paid call is out: its cost decides whether another may start
                    return
                if left <= 0:
                    self.stop = "money budget spent"
                    return
            if self.window.should_plan():
                self.plan()
                if self.stop is not None:
                    return
            name = self.window.next_problem()
            if name is None:
                return
            if self.capped(name):
                continue
            agent = cfg.agent if left is None else cfg.agent.model_copy(update={"budget_usd": left})
            [a] = submit_attempts(cfg.run_id, self.states[name], 1, agent, self.options)
            self.window.submitted(name)
            self.unstored[a.cid] = a
            for fut, is_verdict in ((a.prepared, False), (a.judged, True)):
                fut.add_done_callback(lambda _f, a=a, v=is_verdict: self.events.put((a, v)))

    def handle(self, a: Attempt, is_verdict: bool) -> None:
        """Store the candidate (or the failure) when its prepare is done, its traces when its judge is (the
        candidate row always first, so a resumed run finds every judged candidate)."""
        if self.unstored.pop(a.cid, None) is not None:
            generated = store_prepared(self.store, self.cfg.run_id, a)
            self.spent += generated.candidate.cost_usd if generated.candidate else 0.0
            self.spent += generated.failure.cost_usd if generated.failure else 0.0
            self.made[a.cid] = generated.candidate is not None
            if generated.candidate is not None:
                self.stored += 1
            elif generated.failure is not None:
                if generated.failure.final:  # asking again would fail the same way
                    self.retire(a.problem, f"agent failed: {generated.failure.reason}")
            else:
                self.retire(a.problem, NOTHING_MORE)
        if is_verdict:
            store_verdict(self.store, self.cfg.run_id, a)
            self.window.judged(a.problem)
            if self.made.pop(a.cid, False):  # an attempt that made no candidate does not move the bar
                self.progress.step(f"round {self.rnd - 1}: {a.problem}")

    def plan(self) -> None:
        cfg = self.cfg
        judged = dict(self.window.judged_since_plan)
        known = {s.problem: s for s in problem_stats(cfg.data_dir, cfg.run_id, {p: n for p, n in judged.items() if n})}
        stats = []
        for p in self.problems:
            s = known.get(p.name) or ProblemStats(p.name, 0, None, None, 0.0, 0, 0.0, 0.0)
            if judged and not judged.get(p.name) and p.name in self.last_stats:
                # no verdict since the last plan: its last gain still stands (0 would read as a plateau)
                s = replace(s, recent_gain=self.last_stats[p.name].recent_gain)
            stats.append(s)
        self.last_stats = {s.problem: s for s in stats}
        for s in stats:
            self.capped(s.problem)
        live = [s for s in stats if s.problem not in self.window.exhausted]
        remaining = sum(self.cfg.max_candidates - self.states[s.problem].next_attempt for s in live)
        alloc = self.planner.allocate(live, min(remaining, max(len(self.problems), 2 * self.gpu_slots)))
        if alloc.fallback:
            get_run_logger().warning(f"round {self.rnd}: the LLM planner's answer was not used: {alloc.fallback}")
        self.spent += alloc.cost_usd
        self.window.new_plan(alloc.attempts)
        reasons = _decision_reasons(alloc) | self.done
        self.store.append("decisions", [
            {"run_id": cfg.run_id, "round": self.rnd, "problem": s.problem, "attempts": alloc.attempts.get(s.problem, 0),
             "stopped": s.problem in alloc.stopped or s.problem in self.window.exhausted,
             "headroom": None if s.best_sol_score is None else 1.0 - s.best_sol_score,
             "reason": reasons.get(s.problem, "no slot this round"), "planner": alloc.planner,
             "cost_usd": alloc.cost_usd if i == 0 else 0.0}
            for i, s in enumerate(stats)
        ])
        create_markdown_artifact(
            key=artifact_key("progress", cfg.run_id),
            markdown=f"round {self.rnd}: {self.stored} candidates stored, {self.window.busy()} attempts in flight; "
            "planner: " + "; ".join(f"{p}: {r}" for p, r in reasons.items()),
        )
        self.rnd += 1
        if sum(alloc.attempts.values()) == 0:
            self.stop = self.why_done() if not live else "planner stopped every problem"


def _decision_reasons(alloc: Allocation) -> dict[str, str]:
    if not alloc.fallback:
        return dict(alloc.reasons)
    return {p: f"LLM planner's answer unusable ({alloc.fallback}); rules: {r}" for p, r in alloc.reasons.items()}


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
    all_problems, skipped = load_problems(cfg.problem_dirs)
    if skipped:
        logger = get_run_logger()
        for sk in skipped:
            logger.warning(f"problem left out of this run: {sk.reason}")
        store_failures(store, [failure_row(cfg.run_id, sk.path, "load", sk.reason, path=sk.path) for sk in skipped])
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
    states = load_states(Path(cfg.data_dir), cfg.run_id, problems, device=device)
    if cfg.measure_baseline:
        measure_missing_baselines(cfg, store, problems, options)
    for st in states.values():
        st.t_b_ms = baseline_times(cfg.data_dir, st.problem.name, device)
    totals = run_totals(cfg.data_dir, cfg.run_id)
    progress = _Progress(cfg.max_candidates * len(problems), cfg.show_progress)
    progress.done = totals.candidates - sum(len(s.pending) for s in states.values())

    pending = [submit_rejudge(cfg.run_id, st, cid, sol, options) for st in states.values() for cid, sol in st.pending]
    for _ in collect(store, cfg.run_id, pending):
        progress.step("resumed")
    rolling = _Rolling(cfg, store, states, problems, options, gpu_slots, progress, totals.candidates,
                       totals.last_round + 1, totals.spent_usd)
    stop_reason = rolling.run(t_start)
    progress.close()
    return {"stop_reason": stop_reason, "wall_s": time.monotonic() - t_start,
            "skipped_problems": [asdict(sk) for sk in skipped], "failures": run_totals(cfg.data_dir, cfg.run_id).failures}


def measure_baselines(run_id: str, store: ResultStore, problems: list[Problem], options: JudgeOptions) -> int:
    """T_b of each problem, measured on a GPU worker and stored in ``baselines``; a problem whose baseline cannot
    be measured becomes a failure row, and the others are measured all the same. Returns the rows written."""
    futures = []
    for p in problems:
        with gpu():
            futures.append((p, benchmark_baseline.submit(run_id, str(p.path), str(store.data_dir), options)))
    written, failures = 0, []
    for p, f in futures:
        try:
            rows = f.result()
        except Exception as e:  # noqa: BLE001 - one problem's baseline must not stop the others
            reason = describe(e)
            get_run_logger().warning(f"{p.name}: baseline not measured: {reason}")
            failures.append(failure_row(run_id, p.name, "baseline", reason, path=str(p.path)))
            continue
        written += store.append("baselines", rows).written
    if failures:
        store_failures(store, failures)
    return written


def measure_missing_baselines(
    cfg: CampaignConfig, store: ResultStore, problems: list[Problem], options: JudgeOptions
) -> None:
    """T_b of the problems that lack one on this device; one that cannot be measured becomes a failure row
    (its attempts are scored against eager)."""
    missing = [p for p in problems if not baseline_times(cfg.data_dir, p.name, options.device)]
    measure_baselines(cfg.run_id, store, missing, options)


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
    cpu_device_workers: int = 1,
    planner: PlannerKind = "rules",
    planner_model: str | None = None,
) -> dict[str, Any]:
    """Optimize many problems under the planner; returns the report (table + aggregates), why it stopped,
    the problems left out (they did not load) and how many failure rows the run stored.

    ``max_candidates``: attempts per problem at most (default 3); the budgets bound the whole run.
    ``planner``: 'rules' or 'llm' (``planner_model``, default ``model``; its unusable answers fall back to
    the rules)."""
    store_dir = resolve_data_dir(data_dir)
    run_id = check_run_id(run_id or new_run_id())
    dirs = expand_problems(problems)
    if not dirs:
        raise ValueError(f"no problem directories under {problems or [DEFAULT_PROBLEMS]}")
    loaded, skipped = load_problems(dirs)
    if not loaded:  # nothing would run: a bad input, reported before any cluster starts
        reasons = "; ".join(sk.reason for sk in skipped[:5])
        raise InputError(f"none of the {len(dirs)} problem directories loads: {reasons}")
    cfg = CampaignConfig(
        run_id=run_id, data_dir=str(store_dir), problem_dirs=dirs,
        agent=AgentSpec(kind=agent, language=language, model=model, api_base=api_base, budget_usd=budget_usd),
        max_candidates=max_candidates if max_candidates is not None else DEFAULT_CANDIDATES_PER_PROBLEM,
        budget_minutes=budget_minutes, budget_usd=budget_usd, timeout_s=timeout_s, iterations=iterations,
        measure_baseline=measure_baseline, show_progress=show_progress, max_workloads=max_workloads,
        max_workload_mib=max_workload_mib, planner=planner, planner_model=planner_model,
    )
    make_planner(planner, planner_model or model, api_base)  # a bad request fails before any cluster starts
    store = ResultStore(store_dir)
    store.ensure_layout()
    t0 = time.monotonic()
    with dask_runtime(device, dask_address, cpu_device_workers, prestart_judges=True) as rt:
        store.append("runs", [{"run_id": run_id, "event": "start", "agent": agent, "language": language,
                               "model": model, "device": rt.device, "problems": len(dirs),
                               "max_candidates": cfg.max_candidates, "budget_minutes": budget_minutes,
                               "budget_usd": budget_usd}])
        outcome = campaign_rounds.with_options(task_runner=rt.task_runner())(cfg, rt.device, rt.gpu_slots, rt.devices)
    store.append("runs", [{"run_id": run_id, "event": "end", "device": rt.device, "problems": len(dirs),
                           "wall_s": time.monotonic() - t0}])
    out = report(run_id, str(store_dir))
    return out | outcome
