"""T_b: the optimized-PyTorch baseline of each workload, timed as the judge times a candidate, and its store.

T_b is the best of the eager reference and PyTorch's own optimizations of it: ``torch.compile`` (default and
max-autotune without CUDA graphs) and, on CUDA, CUDA-graph replay of the eager and compiled calls, which is
what removes launch overhead from small workloads. Each variant is the reference's source with a wrapper
(``variant_solution``), judged by ``sol_bench.judge.evaluate``: the same sandboxed worker, inputs, preparation,
timer and statistic as candidates (``sol_bench.timed_phase``), so T_b's own code judged as a candidate reads
1.0x of T_b. A variant counts only if it passes the judge (its outputs match the reference within the
workload's tolerance); eager not passing is a ReferenceFailure.

Inductor picks kernel configs at run time by timing them, so one compile is one draw: on an H200, fresh
compiles of one problem kept different configs and read up to 50% apart (``bench/tb_stability.py``).
``BaselineConfig.compiles`` judges each torch.compile variant that many times, each in a fresh worker with
every compile cache off, and keeps the fastest; every draw is recorded.

Stored as ``<data_dir>/baselines/<device-slug>/<problem>.json``, written atomically (temp file + rename).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field

from .errors import ReferenceFailure
from .inputs import InputContext
from .models import Definition, Solution, Status, Workload
from .problem import Problem
from .reference import Reference
from .sol.hardware import device_name, slugify
from .subject import trusted_solution
from .timing import LAUNCH_PREROLL_US, TimingPlan

EAGER = "eager"
COMPILE_DEFAULT = "compile-default"
COMPILE_MAX_AUTOTUNE = "compile-max-autotune-no-cudagraphs"
CUDAGRAPH_EAGER = "cudagraph-eager"
CUDAGRAPH_COMPILE = "cudagraph-compile-default"

CPU_VARIANTS = (EAGER, COMPILE_DEFAULT)
CUDA_VARIANTS = (EAGER, COMPILE_DEFAULT, COMPILE_MAX_AUTOTUNE, CUDAGRAPH_EAGER, CUDAGRAPH_COMPILE)
ALL_VARIANTS = CUDA_VARIANTS


class BaselineRecord(BaseModel):
    """The baseline of one workload on one device."""

    model_config = ConfigDict(frozen=True)

    problem: str = Field(description="Problem name.")
    uuid: str = Field(description="Workload uuid.")
    device_name: str = Field(description="Device the times were measured on, e.g. 'NVIDIA H200'.")
    eager_ms: float = Field(gt=0, description="Median latency of the eager reference.")
    t_b_ms: float = Field(gt=0, description="Best median latency over the variants: the baseline T_b.")
    best_variant: str = Field(description="Variant that set T_b.")
    variants: dict[str, float] = Field(description="Variant -> median latency (ms) of those that ran and matched.")
    iqr_ms: dict[str, float] = Field(default_factory=dict, description="Variant -> interquartile range (ms).")
    failed: dict[str, str] = Field(default_factory=dict, description="Variant -> why it was not counted.")
    torch_version: str = Field(description="torch.__version__ used.")
    timestamp: str = Field(description="ISO 8601, UTC.")
    timing_method: str | None = Field(default=None, description="How time was measured (None: stored before this field).")
    compile_draws: dict[str, list[float]] = Field(
        default_factory=dict, description="torch.compile variant -> median latency (ms) of each fresh compile, in "
        "order; ``variants`` holds the fastest.")  # fmt: skip


class ProblemBaselines(BaseModel):
    """One stored file: every workload's baseline for one problem on one device."""

    model_config = ConfigDict(frozen=True)

    problem: str = Field(description="Problem name.")
    device_name: str = Field(description="Device name.")
    records: list[BaselineRecord] = Field(description="One per workload.")


@dataclass(frozen=True)
class BaselineConfig:
    device: str = "cpu"
    variants: tuple[str, ...] | None = None  # None: every variant the device supports
    warmup: int = 10  # the judge's timing plan (sol_bench.timing.TimingPlan), as JudgeConfig's defaults
    iterations: int = 50
    min_iterations: int = 5
    time_budget_s: float = 5.0
    preroll_us: float = LAUNCH_PREROLL_US  # CUDA launch pre-roll, as the judge's (sol_bench.timing)
    preroll_kind: str = "stream"
    timer: str = "events"  # CUDA timer, as the judge's: T_b and T_k must come from the same one
    seed: int = 0
    ctx: InputContext = field(default_factory=InputContext)
    compiles: int = 1  # fresh compiles of each torch.compile variant; the fastest counts
    staging_root: Path = Path("kernels_tmp")
    timeout_s: float = 600.0  # per variant and workload, compiling included

    def __post_init__(self) -> None:
        if self.compiles < 1:
            raise ValueError(f"compiles must be at least 1, got {self.compiles}")
        TimingPlan(self.warmup, self.min_iterations, self.iterations, self.time_budget_s)

    def chosen_variants(self) -> tuple[str, ...]:
        is_cuda = torch.device(self.device).type == "cuda"
        wanted = self.variants or (CUDA_VARIANTS if is_cuda else CPU_VARIANTS)
        unknown = set(wanted) - set(ALL_VARIANTS)
        if unknown:
            raise ValueError(f"unknown baseline variants {sorted(unknown)}; known: {', '.join(ALL_VARIANTS)}")
        if not is_cuda:
            wanted = tuple(v for v in wanted if not v.startswith("cudagraph"))
        return tuple(dict.fromkeys((EAGER, *wanted)))

    def judge_config(self):
        """The judge's configuration for timing one variant: the candidate's protocol, no reference timing."""
        from .judge import JudgeConfig

        return JudgeConfig(
            device=self.device, timeout_s=self.timeout_s, seed=self.seed, correctness_rounds=2, warmup=self.warmup,
            iterations=self.iterations, min_iterations=self.min_iterations, time_budget_s=self.time_budget_s,
            data_root=self.ctx.data_root, staging_root=self.staging_root, time_reference=False,
            launch_preroll_us=self.preroll_us, preroll_kind=self.preroll_kind, timer=self.timer,
        )  # fmt: skip


COMPILED_VARIANTS = frozenset({COMPILE_DEFAULT, COMPILE_MAX_AUTOTUNE, CUDAGRAPH_COMPILE})
_COMPILE_MODES = {COMPILE_DEFAULT: None, COMPILE_MAX_AUTOTUNE: "max-autotune-no-cudagraphs", CUDAGRAPH_COMPILE: None}

# Prepended to a compiled variant: one compile is one draw, so nothing cached from an earlier one is reused.
_FRESH_COMPILE = """
import torch._inductor.config as _sol_bench_inductor_config

_sol_bench_inductor_config.force_disable_caches = True  # FX graph, AOT autograd and autotune caches
"""

_COMPILED = """
import torch as _sol_bench_torch

_sol_bench_target = _sol_bench_torch.compile(run, dynamic=False{mode})
"""

_EAGER_TARGET = """
_sol_bench_target = run
"""

# CUDA-graph variants take the outputs (destination passing) and replay one graph per argument signature
# (the judge's buffer sets keep their addresses; their content is refilled in place, which a replay reads).
_GRAPHED = """
import torch as _sol_bench_torch

_sol_bench_graphs = {{}}


def _sol_bench_body(inputs, outputs):
    res = _sol_bench_target(*inputs)
    res = res if isinstance(res, (tuple, list)) else (res,)
    for o, r in zip(outputs, res):
        o.copy_(r)


def solforge_graphed(*args):
    inputs, outputs = args[:{n_in}], args[{n_in}:]
    key = tuple((a.data_ptr(), tuple(a.shape), a.dtype) if isinstance(a, _sol_bench_torch.Tensor) else a for a in args)
    graph = _sol_bench_graphs.get(key)
    if graph is None:
        side = _sol_bench_torch.cuda.Stream()
        side.wait_stream(_sol_bench_torch.cuda.current_stream())
        with _sol_bench_torch.cuda.stream(side):
            for _ in range(3):
                _sol_bench_body(inputs, outputs)
        _sol_bench_torch.cuda.current_stream().wait_stream(side)
        graph = _sol_bench_torch.cuda.CUDAGraph()
        with _sol_bench_torch.cuda.graph(graph):
            _sol_bench_body(inputs, outputs)
        _sol_bench_graphs[key] = graph
    graph.replay()
"""


def variant_solution(definition: Definition, name: str) -> Solution:
    """Variant ``name`` of the reference as a solution the judge times like any candidate."""
    if name not in ALL_VARIANTS:
        raise ValueError(f"unknown variant {name!r}")
    label = f"{definition.name}__tb_{name}"
    compiled = name in COMPILED_VARIANTS
    mode = _COMPILE_MODES.get(name)
    target = _COMPILED.format(mode=f", mode={mode!r}" if mode else "") if compiled else _EAGER_TARGET
    if compiled:
        target = _FRESH_COMPILE + target
    if name.startswith("cudagraph"):
        graphed = _GRAPHED.format(n_in=len(definition.inputs))
        return trusted_solution(definition, label, "solforge_graphed", dps=True, extra=target + graphed)
    return trusted_solution(definition, label, "_sol_bench_target", extra=target)


@dataclass(frozen=True)
class VariantTime:
    median_ms: float
    iqr_ms: float
    method: str


class VariantFailed(Exception):
    """A variant did not pass the judge; ``status`` is its verdict."""

    def __init__(self, status: Status, text: str):
        super().__init__(text)
        self.status = status


def judge_variant(problem: Problem, solution: Solution, config: BaselineConfig) -> dict[str, VariantTime | VariantFailed]:
    """One variant judged as a candidate on every workload of ``problem`` (one worker for them all):
    workload uuid -> its time, or why it did not pass."""
    from .judge import evaluate

    got: dict[str, VariantTime | VariantFailed] = {}
    for trace in evaluate(problem, solution, config.judge_config()):
        ev, perf = trace.evaluation, trace.evaluation.performance
        if ev.status is not Status.PASSED or perf is None:
            got[trace.workload.uuid] = VariantFailed(ev.status, ev.reason or ev.log[-500:])
        else:
            got[trace.workload.uuid] = VariantTime(perf.latency_ms, perf.latency_iqr_ms or 0.0, perf.timing_method or "")
    return got


@dataclass
class _Tally:
    """What the variants judged so far read on one workload."""

    times: dict[str, float] = field(default_factory=dict)
    iqrs: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    draws: dict[str, list[float]] = field(default_factory=dict)
    method: str | None = None

    def add(self, name: str, got: VariantTime | VariantFailed) -> None:
        if name in self.failed:  # one failed compile (a mismatch, a crash) leaves the variant out altogether
            return
        if isinstance(got, VariantFailed):
            why = "outputs differ from eager (the reference)" if got.status is Status.INCORRECT_NUMERICAL else ""
            self.failed[name] = (f"{why}: {got}" if why else f"{got.status.value}: {got}")[:500]
            for table in (self.times, self.iqrs, self.draws):
                table.pop(name, None)
            return
        if name in COMPILED_VARIANTS:
            self.draws.setdefault(name, []).append(got.median_ms)
        if name not in self.times or got.median_ms < self.times[name]:
            self.times[name], self.iqrs[name] = got.median_ms, got.iqr_ms
        self.method = got.method


def judge_baselines(
    problem: Problem, config: BaselineConfig, progress: Callable[[str], None] | None = None
) -> tuple[list[BaselineRecord], dict[str, str]]:
    """Judge every variant on every workload of ``problem`` and keep, per workload, the best that passes.

    Variant-major: each variant (each compile draw) is one judge call over all workloads, so a problem costs
    one worker start per draw rather than one per draw and workload. Returns the records of the workloads
    whose eager reference passed, and uuid -> why for those whose eager reference did not (no T_b there).
    ``progress`` gets one line per judge call: the variant, its workloads and the seconds it took."""
    tallies = {w.uuid: _Tally() for w in problem.workloads}
    for name in config.chosen_variants():
        solution = variant_solution(problem.definition, name)
        for _ in range(config.compiles if name in COMPILED_VARIANTS else 1):
            todo = [u for u, t in tallies.items() if name not in t.failed and EAGER not in t.failed]
            if not todo:
                break
            t0 = time.monotonic()
            got = judge_variant(problem.select(todo), solution, config)
            if progress:
                progress(f"{problem.name}: {name}: {len(todo)} workloads in {time.monotonic() - t0:.1f} s")
            for uuid in todo:
                tallies[uuid].add(name, got.get(uuid) or VariantFailed(Status.RUNTIME_ERROR, "no trace returned"))
    hardware = device_name(torch.device(config.device))
    records, refused = [], {}
    for w in problem.workloads:
        t = tallies[w.uuid]
        if EAGER not in t.times:
            refused[w.uuid] = (
                f"{problem.name}/{w.uuid}: the eager reference failed the judge ({t.failed.get(EAGER, 'no time')})"
            )
            continue
        best = min(t.times, key=t.times.__getitem__)
        records.append(BaselineRecord(
            problem=problem.name, uuid=w.uuid, device_name=hardware, eager_ms=t.times[EAGER], t_b_ms=t.times[best],
            best_variant=best, variants=t.times, iqr_ms=t.iqrs, failed=t.failed, torch_version=torch.__version__,
            timestamp=datetime.now(timezone.utc).isoformat(), timing_method=t.method, compile_draws=t.draws,
        ))  # fmt: skip
    return records, refused


def measure_baselines(problem: Problem, config: BaselineConfig) -> list[BaselineRecord]:
    """Every workload's record; a ReferenceFailure when the eager reference fails the judge on any of them."""
    records, refused = judge_baselines(problem, config)
    if refused:
        raise ReferenceFailure("; ".join(refused.values()))
    return records


def measure_workload(
    problem: Problem, workload: Workload, reference: Reference | None = None, config: BaselineConfig = BaselineConfig()
) -> BaselineRecord:
    """One workload's record (``reference`` is accepted for older callers; the judge loads its own)."""
    [record] = measure_baselines(problem.select([workload.uuid]), config)
    return record


def baseline_path(data_dir: Path | str, problem: str, device: str) -> Path:
    """``<data_dir>/baselines/<device-slug>/<problem>.json``; ``device`` is a device name."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", problem).lstrip(".") or "problem"
    return Path(data_dir) / "baselines" / slugify(device) / f"{safe}.json"


def save_baselines(data_dir: Path | str, records: list[BaselineRecord]) -> Path:
    """Write one problem's records atomically; returns the path."""
    if not records:
        raise ValueError("no baseline records to save")
    first = records[0]
    if any(r.problem != first.problem or r.device_name != first.device_name for r in records):
        raise ValueError("records of one file must share problem and device")
    path = baseline_path(data_dir, first.problem, first.device_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = ProblemBaselines(problem=first.problem, device_name=first.device_name, records=records)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(body.model_dump_json(indent=2))
    tmp.replace(path)
    return path


def load_baselines(data_dir: Path | str, problem: str, device_name: str) -> dict[str, BaselineRecord]:
    """uuid -> record of one problem on one device; empty when none is stored."""
    path = baseline_path(data_dir, problem, device_name)
    if not path.is_file():
        return {}
    stored = ProblemBaselines.model_validate_json(path.read_text())
    return {r.uuid: r for r in stored.records}
