"""Where a candidate's judged latency goes: host launch time vs GPU time, per candidate, on one workload.

For each problem (its first workload) this times, in this one trusted process:

- ``host_us``: the host's time inside one call (perf_counter, the GPU idle before each call);
- ``gpu_us``: the GPU's busy time per call from CUPTI (torch.profiler): kernels, copies and sets;
- ``kernels``: GPU activities per call;
- ``judged_us`` / ``judged0_us``: the judge's protocol (``sol_bench.timing.time_callable``) with the
  launch pre-roll and without it.

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

from sol_bench.baseline import CUDAGRAPH_COMPILE, EAGER, _outputs, _variant_callable  # noqa: E402
from sol_bench.correctness import compare  # noqa: E402
from sol_bench.build import plan_build, run_build  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.models import Solution  # noqa: E402
from sol_bench.problem import Problem, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
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


def load_candidate(sol: Solution, device: str, staging_root: Path) -> Callable[..., Any]:
    staged = stage(sol, staging_root)
    if sol.spec.is_cpp:
        built = run_build(plan_build(sol, staged, device, candidate_env(staged, device)), 600.0)
        path = str(built.module_path)
        loader = importlib.machinery.ExtensionFileLoader(Path(path).stem.split(".")[0], path)
        spec = importlib.util.spec_from_loader(loader.name, loader)
    else:
        sys.path.append(str(staged.src))
        spec = importlib.util.spec_from_file_location(f"lp_{staged.key}", staged.src / sol.spec.entry_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, sol.spec.entry_function)


def host_us(fn: Callable[[], Any], device: torch.device, n: int = 50) -> float:
    xs = []
    for _ in range(n):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize(device)
    return statistics.median(xs)


def gpu_us(fn: Callable[[], Any], device: torch.device, n: int = 20) -> tuple[float, float]:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize(device)
    busy, count = 0.0, 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            busy += e.time_range.elapsed_us()
            count += 1
    return busy / n, count / n


def measure(problem: Problem, name: str, fn: Callable[[], Any], device: torch.device) -> Row:
    for _ in range(5):
        fn()
    g, k = gpu_us(fn, device)
    j = time_callable(fn, device, 5, 30, True, None, LAUNCH_PREROLL_US).median_ms * 1e3
    j0 = time_callable(fn, device, 5, 30, True, None, 0.0).median_ms * 1e3
    return Row(problem.name, name, host_us(fn, device), g, k, j, j0)


def profile_problem(problem: Problem, device: torch.device, candidates: int, staging: Path) -> list[Row]:
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
                rows.append(measure(problem, variant, _variant_callable(variant, reference.run, inputs, device), device))
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{problem.name}: {variant} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
        torch.compiler.reset()
        outs = [torch.empty(s, dtype=d, device=device) for s, d in output_specs(problem.definition, workload).values()]
        for sol in likely_candidates(problem, str(device), candidates):
            try:
                f = load_candidate(sol, str(device), staging)
                args = inputs + outs if sol.spec.destination_passing_style else inputs
                box = []
                row = measure(problem, sol.name.split("__", 1)[-1], lambda f=f, a=args: box.append(f(*a)), device)
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


def table(rows: list[Row]) -> str:
    lines = [
        "| problem | candidate | host µs | GPU busy µs | GPU ops/call | judged µs (pre-roll) | judged µs (none) | matches |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.problem} | {r.name} | {r.host_us:.1f} | {r.gpu_us:.1f} | {r.kernels:.1f} | {r.judged_us:.1f} | {r.judged0_us:.1f} | {r.matches} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidates", type=int, default=3, help="offline-agent proposals per problem")
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type != "cuda":
        ap.error("launch_profile needs a CUDA device")
    rows: list[Row] = []
    for p in a.problems:
        new = profile_problem(load_problem(p), device, a.candidates, a.staging_root)
        print(table(new), flush=True)
        rows += new
    text = f"# Launch profile ({torch.cuda.get_device_name(device)}, torch {torch.__version__})\n\n" + table(rows)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
