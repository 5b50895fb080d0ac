"""Time one template family's kernels over a parameter grid wider than its planned one, in this process.

The offline agent judges a few planned variants per problem, each in the judge's sandbox. This is the
exploration step before that: every point of ``--grid`` (JSON lists of values, laid over the renderer's first
variant; several ``--grid`` options are chained) is rendered as the agent would render it, loaded here
(trusted: our own templates), checked against the reference on one workload (``--workload``: the smallest by
default), and timed with the judge's protocol (``sol_bench.timing.time_callable``: L2 flush, ``--timer``). A
point that fails to render, build, run or match is a row with its error, and the sweep goes on. The table
(fastest first) and the JSON lines are rewritten after every point, so a run cut by a time limit keeps what it
measured.
``--kernels N`` adds where the time of the N fastest goes (GPU activities per call, CUPTI).

    python bench/template_sweep.py data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16 --family mlp \\
        --grid '{"tma": [false, true], "split": [2, 4, 8]}' --device cuda --timer cupti -o /tmp/sweep.md

On the CPU the Triton kernels run in the interpreter (set ``TRITON_INTERPRET=1``): a check of the sweep, not
a measurement.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402

from agents.offline.graph import trace_ops  # noqa: E402
from agents.offline.templates import FAMILIES, build_solution  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.problem import Problem, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
from sol_bench.timing import TIMERS, time_callable  # noqa: E402


@dataclass
class Point:
    params: dict[str, Any]
    us: float | None = None  # median of the timed calls
    matches: str = ""  # "yes", or why not
    error: str = ""  # render/build/run failure
    kernels_us: list[tuple[str, float]] = field(default_factory=list)


def grid_points(base: dict[str, Any], grids: list[dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """Each grid's product laid over ``base``, grids in order, repeats dropped (first kept)."""
    points: list[dict[str, Any]] = []
    for g in grids or [{}]:
        for values in itertools.product(*g.values()):
            p = {**base, **dict(zip(g, values))}
            if p not in points:
                points.append(p)
    return points


def parse_grid(text: str) -> dict[str, list[Any]]:
    try:
        g = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--grid is not JSON: {e}") from None
    if not isinstance(g, dict) or not all(isinstance(v, list) and v for v in g.values()):
        raise argparse.ArgumentTypeError("--grid must be a JSON object of non-empty lists, e.g. '{\"bm\": [64, 128]}'")
    return g


def renderer_for(problem: Problem, family: str, language: str):
    """(family, binding, renderer) of the first binding the family's probe keeps for ``problem``."""
    fam = next((f for f in FAMILIES if f.name == family), None)
    if fam is None:
        raise SystemExit(f"unknown family {family!r}: one of {', '.join(f.name for f in FAMILIES)}")
    bindings = fam.match(problem, trace_ops(problem))
    if not bindings:
        raise SystemExit(f"family {family} does not match {problem.name}")
    r = next((r for r in fam.renderers if r.language == language), None)
    if r is None:
        raise SystemExit(f"family {family} has no {language} renderer")
    return fam, bindings[0], r


@dataclass
class Loaded:
    """One rendered point, loaded here, with its arguments on the problem's first workload."""

    fn: Any
    args: list[Any]
    outs: list[torch.Tensor]
    dps: bool


def load_point(problem: Problem, fam, binding, renderer, params: dict[str, Any], device: torch.device,
               staging: Path, inputs: list[Any]) -> Loaded:
    from launch_profile import load_candidate

    sol = build_solution(problem, fam.name, renderer, binding, params)
    fn = load_candidate(sol, str(device), staging)
    outs = [torch.empty(s, dtype=d, device=device) for s, d in output_specs(problem.definition, problem.workloads[0]).values()]
    dps = sol.spec.destination_passing_style
    return Loaded(fn, inputs + outs if dps else list(inputs), outs, dps)


def workload_inputs(problem: Problem, device: torch.device) -> tuple[Any, list[Any]]:
    reference = load_reference(problem.definition)
    return reference, list(make_inputs(problem.definition, problem.workloads[0], device, 1234, reference).values())


def measure_point(problem: Problem, fam, binding, renderer, params: dict[str, Any], device: torch.device,
                  staging: Path, timer: str, iterations: int) -> Point:
    from launch_profile import _matches

    point = Point(params)
    try:
        reference, inputs = workload_inputs(problem, device)
        p = load_point(problem, fam, binding, renderer, params, device, staging, inputs)
        with torch.no_grad():
            expected = reference.run(*inputs)
            expected = [t.clone() for t in (expected if isinstance(expected, (tuple, list)) else (expected,))]
            result = p.fn(*p.args)
            got = p.outs if p.dps else list(result if isinstance(result, tuple) else (result,))
            point.matches = _matches(got, expected, problem.workloads[0])
            del result, got
            stats = time_callable(lambda: p.fn(*p.args), device, 3 if device.type == "cuda" else 1, iterations, True,
                                  None, timer=timer if device.type == "cuda" else "events")  # fmt: skip
            point.us = stats.median_ms * 1e3
    except Exception as e:  # noqa: BLE001 - a row says why
        point.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"
        traceback.print_exc(limit=2)
    return point


def prebuild(problem: Problem, fam, binding, renderer, points: list[dict[str, Any]], device: torch.device,
             staging: Path, jobs: int) -> None:
    """Build every C++ point's module ``jobs`` at a time into its staging cache, so the timed loop only loads
    them; a point that fails here fails again, with its message, when it is measured."""
    from concurrent.futures import ThreadPoolExecutor

    from launch_profile import build_cpp

    def one(params: dict[str, Any]) -> None:
        try:
            sol = build_solution(problem, fam.name, renderer, binding, params)
            if sol.spec.is_cpp:
                build_cpp(sol, str(device), staging)
        except Exception:  # noqa: BLE001 - measured (and reported) in the loop
            pass

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, points))
    print(f"prebuilt {len(points)} points, {jobs} at a time, in {time.perf_counter() - t0:.1f} s", flush=True)


def _changed(params: dict[str, Any], base: dict[str, Any]) -> str:
    diff = {k: v for k, v in params.items() if base.get(k, object()) != v}
    return " ".join(f"{k}={v}" for k, v in diff.items()) or "(first variant)"


def table(problem: str, points: list[Point], base: dict[str, Any]) -> str:
    """Fastest matching point first; then the ones that did not match, then the failures."""
    def key(p: Point):
        return (p.error != "", p.matches != "yes", p.us if p.us is not None else float("inf"))

    lines = [f"# Template sweep: {problem}", "", f"Base (the renderer's first variant): `{json.dumps(base)}`", "",
             "| # | params (changed from base) | µs | matches | error |", "|---:|---|---:|---|---|"]  # fmt: skip
    for i, p in enumerate(sorted(points, key=key), 1):
        us = "–" if p.us is None else f"{p.us:.2f}"
        lines.append(f"| {i} | {_changed(p.params, base)} | {us} | {p.matches or '–'} | {p.error or ''} |")
    kern = [p for p in sorted(points, key=key) if p.kernels_us]
    if kern:
        lines += ["", "## GPU activities per call", "", "| params | activity | µs |", "|---|---|---:|"]
        for p in kern:
            for name, us in p.kernels_us:
                lines.append(f"| {_changed(p.params, base)} | `{name[:80]}` | {us:.2f} |")
    return "\n".join(lines) + "\n"


def write(points: list[Point], problem: str, base: dict[str, Any], out: Path | None, json_out: Path | None) -> None:
    if out:
        out.write_text(table(problem, points, base))
    if json_out:
        json_out.write_text("".join(json.dumps({"problem": problem, **asdict(p)}) + "\n" for p in points))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--family", required=True)
    ap.add_argument("--language", default="triton")
    ap.add_argument("--grid", type=parse_grid, action="append", default=[],
                    help="JSON object of value lists laid over the first variant; repeat to chain grids")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", choices=TIMERS, default="cupti")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--workload", type=int, default=0,
                    help="which workload by bytes moved: 0 the smallest, 1 the next, ... (each point is checked on it)")
    ap.add_argument("--kernels", type=int, default=0, help="GPU activities of the N fastest matching points")
    ap.add_argument("--build-jobs", type=int, default=1, help="C++ points built this many at a time first")
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    device = torch.device(a.device)
    problem = load_problem(a.problem)
    ranked = problem.smallest_workloads(len(problem.workloads))
    if not 0 <= a.workload < len(ranked):
        ap.error(f"--workload {a.workload}: {problem.name} has workloads 0-{len(ranked) - 1}")
    # bound (probed on the CPU) on the smallest workload, as the agent binds: a large one is too big to probe
    fam, binding, renderer = renderer_for(problem.select(ranked[:1]), a.family, a.language)
    problem = problem.select([ranked[a.workload]])
    if renderer.needs_gpu and device.type != "cuda" and a.language == "triton":
        import os

        if os.environ.get("TRITON_INTERPRET") != "1":
            raise SystemExit("Triton on the CPU needs TRITON_INTERPRET=1")
    base = renderer.variants()[0]
    points = grid_points(base, a.grid)
    print(f"{problem.name}: {len(points)} points of {fam.name}/{a.language}", flush=True)
    if a.build_jobs > 1 and renderer.language == "cuda_cpp":
        prebuild(problem, fam, binding, renderer, points, device, a.staging_root, a.build_jobs)
    done: list[Point] = []
    for i, params in enumerate(points, 1):
        t0 = time.perf_counter()
        p = measure_point(problem, fam, binding, renderer, params, device, a.staging_root, a.timer, a.iterations)
        done.append(p)
        us = "–" if p.us is None else f"{p.us:.2f} µs"
        print(f"[{i}/{len(points)}] {_changed(params, base)}: {us} {p.matches} {p.error} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
        write(done, problem.name, base, a.out, a.json_out)
    if a.kernels and device.type == "cuda":
        from launch_profile import gpu_us

        best = sorted((p for p in done if p.matches == "yes" and p.us is not None), key=lambda p: p.us)[: a.kernels]
        for point in best:
            _, inputs = workload_inputs(problem, device)
            p = load_point(problem, fam, binding, renderer, point.params, device, a.staging_root, inputs)
            with torch.no_grad():
                for _ in range(3):
                    p.fn(*p.args)
                _, _, per_name = gpu_us(lambda: p.fn(*p.args), device)
            point.kernels_us = sorted(per_name.items(), key=lambda kv: -kv[1])
        write(done, problem.name, base, a.out, a.json_out)
    print(table(problem.name, done, base), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
