"""The per-problem optimization loop: generate -> compile -> verify -> score -> store, each attempt's
feedback going to the agent's next ``propose``. The campaign submits these chains for many problems at
once; ``optimize`` runs one problem on its own.

Every step is its own Prefect task run, but a Dask submission costs ~0.2 s of Prefect context
serialization and hydration, so an attempt is two submissions: ``prepare`` (CPU worker: generate and
compile as nested task runs) and ``judge`` (GPU worker: verify and score). The flow process runs
store-candidate and store-traces as each result arrives (``collect``), with one ResultStore whose
validation suites are built once, and off the GPU slot.

A failure of one attempt outside the judge's verdicts (the agent raised while planning or generating, the
compile step raised, the judge itself failed twice) is stored as a ``failures`` row with its reason, and
the run goes on; a candidate whose judge failed stays unjudged, so a resumed run judges it again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed

from agents.base import AttemptFeedback
from sol_bench.models import Solution
from sol_bench.problem import Problem, load_problem
from solforge.agent_spec import AgentSpec
from solforge.judge_client import JudgeOptions
from solforge.planning.transfer import KinTable
from solforge.store import ResultStore, WriteResult
from solforge.store.campaign_queries import earlier_attempts, run_attempts
from solforge.store.report_queries import solution_file
from solforge.store.rows import candidate_id, feedback
from tasks.common import Compiled, Generated, Prepared, Scored
from tasks.compile import compile_candidate
from tasks.generate import describe, failed, generate
from tasks.score import score
from tasks.store import failure_row, store_candidate, store_failures, store_traces
from tasks.verify import verify

from .runtime import data_dir as resolve_data_dir
from .runtime import dask_runtime, gpu

EARLIER_ATTEMPTS = 64  # of earlier runs, per problem: the prompt summarises old ones, the search skips them


@dataclass
class ProblemState:
    """What a run has stored for one problem: its attempts so far and the feedback for the agent."""

    problem: Problem
    next_attempt: int = 0
    history: list[Any] = field(default_factory=list)  # AttemptFeedback, or futures of this run's scores
    pending: list[tuple[str, Solution]] = field(default_factory=list)  # stored but never judged
    t_b_ms: dict[str, float] = field(default_factory=dict)  # workload uuid -> measured T_b, if any
    kin: dict[str, dict[str, float | None]] = field(default_factory=dict)  # other problems' variant latencies


def load_states(
    data_dir: Path, run_id: str, problems: list[Problem], earlier: int = EARLIER_ATTEMPTS, device: str = "cpu"
) -> dict[str, ProblemState]:
    """Rebuild each problem's state from the tables, so that a resumed run neither loses nor repeats work.

    A problem's history starts with what earlier runs in the data dir judged (at most ``earlier`` of their
    newest attempts, their best passing one last), so a new run builds on them: the offline agent's search
    skips what was measured, an LLM starts from the best earlier source. Its ``kin`` is what any run judged
    on ``device``'s kind of the same template variants on other problems of its size (the transfer of winners)."""
    kin = KinTable.from_store(data_dir)
    states = {p.name: ProblemState(problem=p, kin=kin.kin(p, device)) for p in problems}
    for name, attempts in earlier_attempts(data_dir, run_id, list(states), earlier).items():
        for e in attempts:
            solution = _stored_solution(data_dir, e.run_id, e.candidate_id)
            if solution is not None:
                states[name].history.append(AttemptFeedback(e.candidate_id, solution, feedback(e.traces)))
    stored = run_attempts(data_dir, run_id)
    for problem, last in stored.last_failed.items():  # an attempt that failed before making a candidate counts
        if problem in states:
            states[problem].next_attempt = max(states[problem].next_attempt, last + 1)
    for c in stored.candidates:
        st = states.get(c["problem"])
        if st is None:
            continue
        st.next_attempt = max(st.next_attempt, c["attempt"] + 1)
        solution = _stored_solution(data_dir, run_id, c["candidate_id"])
        if solution is None:
            raise FileNotFoundError(f"{solution_file(data_dir, run_id, c['candidate_id'])}: the candidate row "
                                    "has no solution file")  # fmt: skip
        rows = stored.traces.get(c["candidate_id"])
        if rows:
            st.history.append(AttemptFeedback(c["candidate_id"], solution, feedback(rows)))
        else:
            st.pending.append((c["candidate_id"], solution))
    return states


def _stored_solution(data_dir: Path, run_id: str, candidate_id: str) -> Solution | None:
    path = solution_file(data_dir, run_id, candidate_id)
    return Solution.model_validate_json(path.read_text()) if path.exists() else None


@task(name="prepare", cache_policy=NO_CACHE)
def prepare(agent: AgentSpec, problem_dir: str, history: list[Any], device: str) -> Prepared:
    """generate -> compile on one CPU worker; an error of either is the attempt's ``Failure``, never raised."""
    t0 = time.monotonic()
    try:
        g = generate(agent, problem_dir, history, device)
    except Exception as e:  # noqa: BLE001 - what generate retried and still failed (transient errors)
        return Prepared(generated=failed("generate", e, time.monotonic() - t0), compiled=None)
    try:
        return Prepared(generated=g, compiled=compile_candidate(g))
    except Exception as e:  # noqa: BLE001
        return Prepared(generated=failed("compile", e, g.seconds), compiled=None)


@task(name="judge", cache_policy=NO_CACHE)
def judge(
    problem_dir: str, prepared: Prepared | Compiled | None, options: JudgeOptions,
    run_id: str, cid: str, problem: str, t_b_ms: dict[str, float],
) -> Scored:
    """verify -> score on a GPU worker (submitted under ``gpu()``). A judge that fails (after verify's retry)
    gives a Scored with ``error`` and no rows, so the attempts chained behind this one still run."""
    compiled = prepared.compiled if isinstance(prepared, Prepared) else prepared
    try:
        return score(run_id, cid, problem, compiled, verify(problem_dir, compiled, options), options.device, t_b_ms)
    except Exception as e:  # noqa: BLE001
        return Scored(candidate_id=cid, error=describe(e))


@dataclass(frozen=True)
class Attempt:
    """One submitted attempt; ``prepared`` is None for a candidate stored before a crash."""

    cid: str
    problem: str
    attempt: int
    prepared: PrefectFuture | None
    judged: PrefectFuture


def store_prepared(store: ResultStore, run_id: str, a: Attempt) -> Generated:
    """Store what an attempt's ``prepare`` made: its candidate row, or its failure row. Returns it."""
    try:
        generated = a.prepared.result().generated
    except Exception as e:  # noqa: BLE001 - prepare catches its own errors; this is the task itself failing
        generated = failed("generate", e, 0.0)
    if generated.failure is not None:
        f = generated.failure
        store_failures(store, [failure_row(run_id, a.problem, f.stage, f.reason, attempt=a.attempt, failure=f)])
    else:
        store_candidate(store, run_id, a.cid, a.problem, a.attempt, generated)
    return generated


def store_verdict(store: ResultStore, run_id: str, a: Attempt) -> WriteResult | None:
    """Store an attempt's traces; a judge that failed (after its retry) becomes a failure row, and None."""
    try:
        scored = a.judged.result()
        error = scored.error
    except Exception as e:  # noqa: BLE001 - the judge task itself failed (``judge`` catches the judge's errors)
        error = describe(e)
    if error is not None:  # the candidate stays unjudged: a resumed run judges it again
        row = failure_row(run_id, a.problem, "judge", error, attempt=a.attempt, candidate_id=a.cid)
        store_failures(store, [row])
        return None
    return store_traces(store, scored)


def collect(store: ResultStore, run_id: str, attempts: list[Attempt]) -> Iterator[WriteResult]:
    """Store each attempt's candidate (or failure) when its ``prepare`` is done and its traces when its
    ``judge`` is; yields the traces' WriteResult, in the order the verdicts arrive. A candidate row is always
    stored before its traces, so a resumed run finds every judged candidate."""
    by_id: dict[Any, tuple[Attempt, bool]] = {}
    for a in attempts:
        if a.prepared is not None:
            by_id[a.prepared.task_run_id] = (a, False)
        by_id[a.judged.task_run_id] = (a, True)
    unstored = {a.cid: a for a in attempts if a.prepared is not None}

    for f in as_completed([f for a in attempts for f in (a.prepared, a.judged) if f is not None]):
        a, is_verdict = by_id[f.task_run_id]
        if unstored.pop(a.cid, None) is not None:
            store_prepared(store, run_id, a)
        if is_verdict and (stored := store_verdict(store, run_id, a)) is not None:
            yield stored


def submit_rejudge(
    run_id: str, state: ProblemState, cid: str, solution: Solution, options: JudgeOptions
) -> Attempt:
    """Judge a candidate stored before a crash and never judged."""
    problem = state.problem
    c = compile_candidate.submit(solution)
    with gpu():
        s = judge.submit(str(problem.path), c, options, run_id, cid, problem.name, state.t_b_ms)
    state.history.append(s)
    return Attempt(cid, problem.name, -1, None, s)


def submit_attempts(
    run_id: str,
    state: ProblemState,
    n: int,
    agent: AgentSpec,
    options: JudgeOptions,
) -> list[Attempt]:
    """Chain ``n`` attempts on one problem; attempt k+1's generate waits for attempt k's score.
    Pass them to ``collect``, which stores them."""
    p = state.problem
    done: list[Attempt] = []
    for k in range(n):
        attempt = state.next_attempt + k
        cid = candidate_id(run_id, p.name, attempt)
        spec = agent.model_copy(update={"kin": state.kin}) if state.kin else agent
        c = prepare.submit(spec, str(p.path), list(state.history), options.device)
        with gpu():
            s = judge.submit(str(p.path), c, options, run_id, cid, p.name, state.t_b_ms)
        done.append(Attempt(cid, p.name, attempt, c, s))
        state.history.append(s)  # the next attempt, in this round or a later one, sees this one's feedback
    state.next_attempt += n
    return done


@flow(name="optimize-problem")
def optimize(
    problem_dir: str,
    run_id: str,
    attempts: int = 3,
    agent: AgentSpec = AgentSpec(),
    device: str = "auto",
    data_dir: str | None = None,
    dask_address: str | None = None,
    timeout_s: float = 60.0,
) -> int:
    """Run ``attempts`` iterated attempts on one problem; returns how many were stored."""
    store_dir = resolve_data_dir(data_dir)
    ResultStore(store_dir).ensure_layout()
    problem = load_problem(problem_dir)
    with dask_runtime(device, dask_address) as rt:
        return _optimize_on.with_options(task_runner=rt.task_runner())(
            str(store_dir), run_id, problem_dir, attempts, agent, JudgeOptions(device=rt.device, timeout_s=timeout_s, worker_devices=rt.devices),
            problem.name,
        )


@flow(name="optimize-problem-attempts")
def _optimize_on(
    store_dir: str, run_id: str, problem_dir: str, attempts: int, agent: AgentSpec, options: JudgeOptions, name: str
) -> int:
    problem = load_problem(problem_dir)
    state = load_states(Path(store_dir), run_id, [problem], device=options.device)[name]
    submitted = [submit_rejudge(run_id, state, cid, sol, options) for cid, sol in state.pending]
    submitted += submit_attempts(run_id, state, max(0, attempts - state.next_attempt), agent, options)
    return sum(r.written > 0 for r in collect(ResultStore(store_dir), run_id, submitted))
