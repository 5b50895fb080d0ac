"""Where a candidate's judged latency goes: host launch time vs GPU time, per candidate, on one workload.

For each problem (its first workload) this times, in this one trusted process:

- ``host_us``: the host's time inside one call (perf_counter, the GPU idle before each call);
- ``gpu_us``: the GPU's busy time per call from CUPTI (torch.profiler): kernels, copies and sets;
- ``kernels``: GPU activities per call;
- ``judged_us`` / ``judged0_us``: the judge's protocol (``sol_bench.timing.time_callable``) with the
  launch pre-roll and without it;
- with ``--l2``: ``cupti_dirty_us``, the CUPTI window after the judge's L2 flush (a buffer twice L2's size
  written, which leaves every L2 line dirty), and ``cupti_clean_us``, the same window after reading that much
  instead (L2 evicted, its lines clean). The difference is what the flush's write-backs cost the call.

Rows: the eager reference and its CUDA-graph replay of torch.compile (the usual T_b), then the offline
agent's first ``--candidates`` proposals, built with the judge's build and called here directly. A row whose
``judged_us`` is well above ``gpu_us`` pays host time that the pre-roll does not hide.

    python bench/launch_profile.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda -o /tmp/lp.md
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402

from sol_bench.baseline import CUDAGRAPH_COMPILE, EAGER  # noqa: E402
from sol_bench.correctness import compare  # noqa: E402
from sol_bench.build import plan_build, run_build  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.models import Solution  # noqa: E402
from sol_bench.problem import Problem, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402


def _outputs(x: Any) -> list[torch.Tensor]:
    """The tensors a reference or solution returned, in order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    return [t for t in x if isinstance(t, torch.Tensor)] if isinstance(x, (tuple, list)) else []


def graphed(fn: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """``fn`` captured into a CUDA graph after a warm-up on a side stream; returns its replay."""
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
    """In-process callables of the two T_b variants this profile compares (eager, compiled in a CUDA graph)."""
    if name == EAGER:
        return lambda: run(*inputs)
    if name == CUDAGRAPH_COMPILE:
        compiled = torch.compile(run, dynamic=False)
        return graphed(lambda: compiled(*inputs), device)
    raise ValueError(f"unknown variant {name!r}")
from sol_bench.runner import candidate_env  # noqa: E402
from sol_bench.staging import stage  # noqa: E402
from sol_bench.timing import LAUNCH_PREROLL_US, time_callable  # noqa: E402


@dataclass(frozen=True)
class Row:
    problem: str
    name: str
    host_us: float
    gpu_us: float
    kernels: float
    judged_us: float
    judged0_us: float
    matches: str = ""  # the candidate's outputs vs the reference's after the timed calls ("yes", or why not)
    kernels_us: tuple[tuple[str, float], ...] = ()  # per GPU activity name: µs per call, longest first
    cupti_dirty_us: float | None = None
    cupti_clean_us: float | None = None


def build_cpp(sol: Solution, device: str, staging_root: Path) -> Path:
    """A C++ solution built (or found built) in its staging directory: the module's path."""
    staged = stage(sol, staging_root)
    return run_build(plan_build(sol, staged, device, candidate_env(staged, device)), 600.0).module_path


def load_module(sol: Solution, device: str, staging_root: Path) -> Any:
    """A solution's module, loaded in this process (trusted: our own templates)."""
    if sol.spec.is_cpp:
        path = str(build_cpp(sol, device, staging_root))
        loader = importlib.machinery.ExtensionFileLoader(Path(path).stem.split(".")[0], path)
        spec = importlib.util.spec_from_loader(loader.name, loader)
    else:
        staged = stage(sol, staging_root)
        sys.path.append(str(staged.src))
        spec = importlib.util.spec_from_file_location(f"lp_{staged.key}", staged.src / sol.spec.entry_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_candidate(sol: Solution, device: str, staging_root: Path) -> Callable[..., Any]:
    return getattr(load_module(sol, device, staging_root), sol.spec.entry_function)


def host_us(fn: Callable[[], Any], device: torch.device, n: int = 50) -> float:
    xs = []
    for _ in range(n):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize(device)
    return statistics.median(xs)


def gpu_us(fn: Callable[[], Any], device: torch.device, n: int = 20) -> tuple[float, float, dict[str, float]]:
    """GPU busy µs per call, GPU activities per call, and µs per call of each activity name."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize(device)
    busy, count = 0.0, 0
    per_name: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            busy += e.time_range.elapsed_us()
            count += 1
            per_name[e.name] = per_name.get(e.name, 0.0) + e.time_range.elapsed_us() / n
    return busy / n, count / n, per_name


def l2_rows(fn: Callable[[], Any], device: torch.device) -> tuple[float, float]:
    """(CUPTI window after the judge's dirty flush, after a clean one): median µs of 30 calls each."""
    props = torch.cuda.get_device_properties(device)
    big = torch.ones(max(int(getattr(props, "L2_cache_size", 0)) * 2, 64 << 20) // 4, dtype=torch.float32, device=device)
    sink = torch.empty((), dtype=torch.float32, device=device)
    dirty = time_callable(fn, device, 5, 30, True, None, 0.0, timer="cupti").median_ms * 1e3
    clean = time_callable(fn, device, 5, 30, False, lambda: torch.sum(big, 0, out=sink), 0.0, timer="cupti").median_ms * 1e3
    return dirty, clean


def measure(problem: Problem, name: str, fn: Callable[[], Any], device: torch.device, l2: bool = False) -> Row:
    for _ in range(5):
        fn()
    g, k, per_name = gpu_us(fn, device)
    j = time_callable(fn, device, 5, 30, True, None, LAUNCH_PREROLL_US).median_ms * 1e3
    j0 = time_callable(fn, device, 5, 30, True, None, 0.0).median_ms * 1e3
    kernels = tuple(sorted(per_name.items(), key=lambda kv: -kv[1]))
    dirty, clean = l2_rows(fn, device) if l2 else (None, None)
    return Row(problem.name, name, host_us(fn, device), g, k, j, j0, kernels_us=kernels, cupti_dirty_us=dirty,
               cupti_clean_us=clean)


def profile_problem(problem: Problem, device: torch.device, candidates: int, staging: Path, l2: bool = False) -> list[Row]:
    from bench_offline_agents import likely_candidates

    workload = problem.workloads[0]
    reference = load_reference(problem.definition)
    inputs = list(make_inputs(problem.definition, workload, device, 1234, reference).values())
    rows = []
    with torch.no_grad():
        expected = [t.clone() for t in _outputs(reference.run(*inputs))]
        for variant in (EAGER, CUDAGRAPH_COMPILE):
            torch.compiler.reset()
            try:
                rows.append(measure(problem, variant, _variant_callable(variant, reference.run, inputs, device), device, l2))
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{problem.name}: {variant} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
        torch.compiler.reset()
        outs = [torch.empty(s, dtype=d, device=device) for s, d in output_specs(problem.definition, workload).values()]
        for sol in likely_candidates(problem, str(device), candidates):
            try:
                f = load_candidate(sol, str(device), staging)
                args = inputs + outs if sol.spec.destination_passing_style else inputs
                box = []
                row = measure(problem, sol.name.split("__", 1)[-1], lambda f=f, a=args: box.append(f(*a)), device, l2)
                got = outs if sol.spec.destination_passing_style else _outputs(box[-1])
                rows.append(replace(row, matches=_matches(got, expected, workload)))
            except Exception as e:  # noqa: BLE001
                print(f"{problem.name}: {sol.name} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            torch.compiler.reset()
    return rows


def _matches(got: list[torch.Tensor], expected: list[torch.Tensor], workload) -> str:
    try:
        if len(got) != len(expected):
            return f"{len(got)} outputs, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(f"#{i}", g, e, workload.tolerance)
        return "yes"
    except Exception as e:  # noqa: BLE001 - the table says why
        return f"no: {str(e).splitlines()[0][:80]}"


def _us(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def table(rows: list[Row]) -> str:
    l2 = any(r.cupti_dirty_us is not None for r in rows)
    extra = (" CUPTI µs, dirty flush | CUPTI µs, clean flush |", "---:|---:|") if l2 else ("", "")
    lines = [
        "| problem | candidate | host µs | GPU busy µs | GPU ops/call | judged µs (pre-roll) | judged µs (none) |"
        + extra[0] + " matches |",
        "|---|---|---:|---:|---:|---:|---:|" + extra[1] + "---|",
    ]
    for r in rows:
        cols = f" {_us(r.cupti_dirty_us)} | {_us(r.cupti_clean_us)} |" if l2 else ""
        lines.append(
            f"| {r.problem} | {r.name} | {r.host_us:.1f} | {r.gpu_us:.1f} | {r.kernels:.1f} | {r.judged_us:.1f} | "
            f"{r.judged0_us:.1f} |{cols} {r.matches} |"
        )
    return "\n".join(lines) + "\n"


def kernel_table(rows: list[Row]) -> str:
    """Where each row's GPU time goes: every GPU activity (kernel, copy, set) and its µs per call."""
    lines = ["| problem | candidate | GPU activity | µs per call |", "|---|---|---|---:|"]
    for r in rows:
        for name, us in r.kernels_us:
            lines.append(f"| {r.problem} | {r.name} | `{name[:90]}` | {us:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidates", type=int, default=3, help="offline-agent proposals per problem")
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("--kernels", action="store_true", help="also list each row's GPU activities and their µs")
    ap.add_argument("--l2", action="store_true", help="also time each row under CUPTI after a dirty and a clean flush")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type != "cuda":
        ap.error("launch_profile needs a CUDA device")
    rows: list[Row] = []
    for p in a.problems:
        new = profile_problem(load_problem(p), device, a.candidates, a.staging_root, a.l2)
        print(table(new), flush=True)
        if a.kernels:
            print(kernel_table(new), flush=True)
        rows += new
    text = f"# Launch profile ({torch.cuda.get_device_name(device)}, torch {torch.__version__})\n\n" + table(rows)
    if a.kernels:
        text += "\n## GPU activities per call\n\n" + kernel_table(rows)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
