"""T_b: the optimized-PyTorch baseline of each workload, timed with the judge's protocol, and its store.

T_b is the best of the eager reference and PyTorch's own optimizations of it: ``torch.compile`` (default and
max-autotune without CUDA graphs) and, on CUDA, CUDA-graph replay of the eager and compiled calls, which is
what removes launch overhead from small workloads. A variant counts only if its outputs match the eager
reference within the workload's tolerance. The reference is trusted problem code: it runs in-process.

Inductor picks kernel configs at run time by timing them, so one compile is one draw: on an H200, fresh
compiles of one problem kept different configs and read up to 50% apart (``bench/tb_stability.py``).
``BaselineConfig.compiles`` compiles each torch.compile variant that many times, afresh (Dynamo reset, every
compile cache off), and keeps the fastest; every draw is recorded.

Stored as ``<data_dir>/baselines/<device-slug>/<problem>.json``, written atomically (temp file + rename).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch
from pydantic import BaseModel, ConfigDict, Field

from .correctness import compare
from .errors import CandidateFailure, ReferenceFailure
from .inputs import InputContext, make_inputs
from .models import Workload
from .problem import Problem
from .reference import Reference, load_reference
from .sol.hardware import device_name, slugify
from .timing import LAUNCH_PREROLL_US, time_callable

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
    warmup: int = 10
    iterations: int = 50
    flush_l2: bool = True
    preroll_us: float = LAUNCH_PREROLL_US  # CUDA launch pre-roll, as the judge's (sol_bench.timing)
    timer: str = "events"  # CUDA timer, as the judge's: T_b and T_k must come from the same one
    seed: int = 0
    ctx: InputContext = field(default_factory=InputContext)
    compiles: int = 1  # fresh compiles of each torch.compile variant; the fastest counts

    def __post_init__(self) -> None:
        if self.compiles < 1:
            raise ValueError(f"compiles must be at least 1, got {self.compiles}")

    def chosen_variants(self) -> tuple[str, ...]:
        is_cuda = torch.device(self.device).type == "cuda"
        wanted = self.variants or (CUDA_VARIANTS if is_cuda else CPU_VARIANTS)
        unknown = set(wanted) - set(ALL_VARIANTS)
        if unknown:
            raise ValueError(f"unknown baseline variants {sorted(unknown)}; known: {', '.join(ALL_VARIANTS)}")
        if not is_cuda:
            wanted = tuple(v for v in wanted if not v.startswith("cudagraph"))
        return tuple(dict.fromkeys((EAGER, *wanted)))


def _outputs(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    return [t for t in x if isinstance(t, torch.Tensor)] if isinstance(x, (tuple, list)) else []


def _graphed(fn: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """Capture ``fn`` into a CUDA graph (after a warm-up on a side stream) and return its replay."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> Any:
        graph.replay()
        return out

    return replay


def _variant_callable(name: str, run: Callable[..., Any], inputs: list[Any], device: torch.device) -> Callable[[], Any]:
    if name == EAGER:
        return lambda: run(*inputs)
    if name == COMPILE_DEFAULT:
        compiled = torch.compile(run, dynamic=False)
        return lambda: compiled(*inputs)
    if name == COMPILE_MAX_AUTOTUNE:
        compiled = torch.compile(run, mode="max-autotune-no-cudagraphs", dynamic=False)
        return lambda: compiled(*inputs)
    if name == CUDAGRAPH_EAGER:
        return _graphed(lambda: run(*inputs), device)
    if name == CUDAGRAPH_COMPILE:
        compiled = torch.compile(run, dynamic=False)
        return _graphed(lambda: compiled(*inputs), device)
    raise ValueError(f"unknown variant {name!r}")


COMPILED_VARIANTS = frozenset({COMPILE_DEFAULT, COMPILE_MAX_AUTOTUNE, CUDAGRAPH_COMPILE})


def _fresh_compiles():
    """A context in which torch.compile compiles and autotunes afresh rather than reusing a cached result."""
    import torch._inductor.config as inductor_config

    return inductor_config.patch(force_disable_caches=True)  # FX graph, AOT autograd and autotune caches


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_workload(
    problem: Problem, workload: Workload, reference: Reference, config: BaselineConfig
) -> BaselineRecord:
    """Time every variant on one workload and keep the best one whose outputs match eager."""
    device = torch.device(config.device)
    ctx = config.ctx if config.ctx.problem_dir else InputContext(problem.path, config.ctx.data_root)

    def fresh_inputs() -> list[Any]:
        return list(make_inputs(problem.definition, workload, device, config.seed, reference, ctx).values())

    try:
        with torch.no_grad():
            expected = [t.clone() for t in _outputs(reference.run(*fresh_inputs()))]
        _sync(device)
    except Exception as e:
        raise ReferenceFailure(f"{problem.name}/{workload.uuid}: reference failed: {type(e).__name__}: {e}") from e

    times: dict[str, float] = {}
    iqrs: dict[str, float] = {}
    method = None
    failed: dict[str, str] = {}
    draws: dict[str, list[float]] = {}
    for name in config.chosen_variants():
        for _ in range(config.compiles if name in COMPILED_VARIANTS else 1):
            torch.compiler.reset()  # a fresh compile per shape: no recompile limit, no stale guards
            try:
                with torch.no_grad(), _fresh_compiles():
                    fn = _variant_callable(name, reference.run, fresh_inputs(), device)
                    got = _outputs(fn())
                    _sync(device)
                    if len(got) != len(expected):
                        raise ValueError(f"returned {len(got)} outputs, eager returned {len(expected)}")
                    for i, (o, r) in enumerate(zip(got, expected)):
                        compare(f"#{i}", o, r, workload.tolerance)
                    stats = time_callable(fn, device, config.warmup, config.iterations, config.flush_l2, None,
                                          config.preroll_us, timer=config.timer)  # fmt: skip
            except CandidateFailure as e:
                failed[name] = f"outputs differ from eager: {e}"
                break
            # A variant that cannot be built or run here (compiler missing, graph capture of a syncing op) is
            # recorded with its reason and left out of T_b; only eager failing is fatal.
            except Exception as e:  # noqa: BLE001
                if name == EAGER:
                    raise ReferenceFailure(f"{problem.name}/{workload.uuid}: eager timing failed: {e}") from e
                failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
                break
            if name in COMPILED_VARIANTS:
                draws.setdefault(name, []).append(stats.median_ms)
            if name not in times or stats.median_ms < times[name]:
                times[name], iqrs[name] = stats.median_ms, stats.iqr_ms
            method = stats.method
        if name in failed:  # one failed compile (a mismatch, a crash) leaves the variant out altogether
            times.pop(name, None)
            iqrs.pop(name, None)
            draws.pop(name, None)
    torch.compiler.reset()
    best = min(times, key=times.__getitem__)
    return BaselineRecord(
        problem=problem.name,
        uuid=workload.uuid,
        device_name=device_name(device),
        eager_ms=times[EAGER],
        t_b_ms=times[best],
        best_variant=best,
        variants=times,
        iqr_ms=iqrs,
        failed=failed,
        torch_version=torch.__version__,
        timestamp=datetime.now(timezone.utc).isoformat(),
        timing_method=method,
        compile_draws=draws,
    )


def measure_baselines(problem: Problem, config: BaselineConfig) -> list[BaselineRecord]:
    reference = load_reference(problem.definition)
    return [measure_workload(problem, w, reference, config) for w in problem.workloads]


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
