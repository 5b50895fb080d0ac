"""How far T_b moves between fresh Inductor compiles: ``measure_tb.py`` run N times on each problem, each run
in its own process with its own empty Inductor and Triton caches, as a table (and JSON lines) with the
kernel configurations Inductor's autotuner kept in each run.

Measured on different days, the same problem's T_b has read 1.66 and 2.2 µs (RMSNorm h4096), 3.4 and 6.8 (RoPE), 3.58,
3.39 and 2.66 (gelu_tanh), while our kernels held within a few percent. This separates the two explanations:
the runs of one problem differ in the configs Inductor kept (a compile-time choice), or they keep the same
configs and still read apart (the device or the timing).

    python bench/tb_stability.py data/problems/L1/rmsnorm_fwd_h7168_eps6_bf16 --device cuda --timer cupti \
        --runs 3 --variants compile-default,cudagraph-compile-default -o tb_stability.md --json-out tb_runs.jsonl
    python bench/tb_stability.py tests/fixtures/problems/rmsnorm_small --device cpu --runs 2 --variants eager

Each run's record is measure_tb's (one workload, the smallest) plus ``run`` and ``configs``: the contents of
the ``*.best_config`` files the run's cache holds, one line per autotuned kernel (none for kernels Inductor
launched with a single config, and none on the CPU). The file is keyed by the kernel's source, so where a run
compiles the same kernel twice (compile-default, then the CUDA-graph variant) it holds the later compile's
pick: a run's variants can differ by a config the column does not show. ``--baselines-out`` writes one T_b record a problem in
measure_tb's format (``bench_offline_agents.py --baselines`` and ``offline_table.py`` read it) holding the
fastest run: the best Inductor's autotuner found over the compiles, a T_b no single compile's pick can
flatter. ``--from-runs`` re-renders a cut run's JSON lines (the problems given name their smallest workload).

    python bench/tb_stability.py data/problems/L1 --from-runs tb_runs.jsonl -o tb_stability.md \
        --baselines-out tb_min_of_compiles.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from problem_args import problems_parser  # noqa: E402

from sol_bench.problem import find_problems  # noqa: E402
from sol_bench.timing import TIMERS  # noqa: E402

# best_config keys that identify a file rather than describe the launch
_CONFIG_NOISE = {"configs_hash", "found_by_coordesc", "time_taken_ms", "triton_cache_hash"}


@dataclass(frozen=True)
class Run:
    problem: str
    run: int
    uuid: str | None
    t_b_ms: float | None
    best_variant: str | None
    variants: dict[str, float] = field(default_factory=dict)
    configs: tuple[str, ...] = ()
    error: str | None = None


def config_line(path: Path) -> str:
    """One ``*.best_config`` file as ``key=value`` pairs (its launch parameters, sorted), or why it is unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{path.name}: unreadable ({e.__class__.__name__})"
    if not isinstance(data, dict):
        return f"{path.name}: not an object"
    return " ".join(f"{k}={data[k]}" for k in sorted(data) if k not in _CONFIG_NOISE)


def kept_configs(cache: Path) -> tuple[str, ...]:
    return tuple(sorted(config_line(p) for p in cache.rglob("*.best_config")))


def one_run(problem: Path, run: int, scratch: Path, a: argparse.Namespace) -> Run:
    """measure_tb.py on ``problem`` in a fresh process with empty caches under ``scratch``."""
    cache = scratch / f"{problem.name}.run{run}"
    cache.mkdir(parents=True)
    out = cache / "tb.jsonl"
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
    }
    cmd = [sys.executable, str(REPO / "bench" / "measure_tb.py"), str(problem), "--device", a.device, "--timer",
           a.timer, "--max-workloads", "1", "--iterations", str(a.iterations), "-o", str(out)]  # fmt: skip
    if a.variants:
        cmd += ["--variants", a.variants]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return Run(problem.name, run, None, None, None, error=f"timed out after {a.timeout:.0f} s")
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if proc.returncode != 0 or not records:
        return Run(problem.name, run, None, None, None,
                   error=(proc.stderr or proc.stdout)[-400:].strip() or "no record")  # fmt: skip
    rec = records[0]
    return Run(problem.name, run, rec["uuid"], rec["t_b_ms"], rec["best_variant"], dict(rec["variants"]),
               kept_configs(cache / "inductor"))  # fmt: skip


def fastest_runs(runs: list[Run]) -> list[dict]:
    """One measure_tb-style record a problem with a measured run: the fastest run's T_b and variant, every
    variant's fastest reading over the runs, and each run's T_b in ``runs_t_b_ms``."""
    out = []
    for name in dict.fromkeys(r.problem for r in runs):
        ok = [r for r in runs if r.problem == name and r.t_b_ms is not None]
        if not ok:
            continue
        best = min(ok, key=lambda r: r.t_b_ms)
        variants: dict[str, float] = {}
        for r in ok:
            for v, ms in r.variants.items():
                variants[v] = min(ms, variants.get(v, ms))
        out.append({"problem": name, "uuid": best.uuid, "t_b_ms": best.t_b_ms, "best_variant": best.best_variant,
                    "variants": variants, "runs_t_b_ms": [r.t_b_ms for r in ok],
                    "timing_method": f"fastest of {len(ok)} fresh compiles"})  # fmt: skip
    return out


def read_runs(path: Path, problems: list[Path]) -> list[Run]:
    """Runs from ``--json-out`` lines; a run without a uuid (an older file) takes its problem's smallest workload."""
    from sol_bench.problem import load_problem

    dirs = {p.name: p for p in problems}
    runs = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("uuid") is None and d.get("t_b_ms") is not None:
            if d["problem"] not in dirs:
                raise SystemExit(f"{path}:{n}: run of {d['problem']} has no uuid and its problem directory was not given")
            prob = load_problem(dirs[d["problem"]])
            d["uuid"] = prob.smallest_workloads(1)[0]
        runs.append(Run(d["problem"], d["run"], d.get("uuid"), d["t_b_ms"], d["best_variant"], d.get("variants", {}),
                        tuple(d.get("configs", ())), d.get("error")))  # fmt: skip
    return runs


def summary(runs: list[Run]) -> tuple[float, float, float, float] | None:
    """(min, median, max, spread) of the runs' T_b in ms, spread = max / min - 1; None when none measured."""
    ts = [r.t_b_ms for r in runs if r.t_b_ms is not None]
    if not ts:
        return None
    return min(ts), statistics.median(ts), max(ts), max(ts) / min(ts) - 1


def render(runs: list[Run], device: str, timer: str) -> str:
    variants = sorted({v for r in runs for v in r.variants})
    lines = [
        f"# T_b across fresh Inductor compiles ({device}, timer {timer})",
        "",
        "| problem | run | T_b µs (variant) | " + " | ".join(f"{v} µs" for v in variants) + " | configs kept |",
        "|---|---:|---|" + "---:|" * len(variants) + "---|",
    ]
    for r in runs:
        if r.error:
            lines.append(f"| {r.problem} | {r.run} | failed: {r.error.splitlines()[-1][:120]} |"
                         + " |" * len(variants) + " |")  # fmt: skip
            continue
        cells = " | ".join(f"{r.variants[v] * 1e3:.2f}" if v in r.variants else "-" for v in variants)
        kept = "<br>".join(r.configs) or "-"
        lines.append(f"| {r.problem} | {r.run} | {r.t_b_ms * 1e3:.2f} ({r.best_variant}) | {cells} | {kept} |")
    lines += ["", "| problem | runs | min µs | median µs | max µs | spread | distinct config sets |",
              "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name in dict.fromkeys(r.problem for r in runs):
        mine = [r for r in runs if r.problem == name]
        s = summary(mine)
        distinct = len({r.configs for r in mine if not r.error})
        if s is None:
            lines.append(f"| {name} | {len(mine)} | - | - | - | - | - |")
        else:
            lo, mid, hi, spread = s
            lines.append(f"| {name} | {len(mine)} | {lo * 1e3:.2f} | {mid * 1e3:.2f} | {hi * 1e3:.2f} "
                         f"| {spread:.0%} | {distinct} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = problems_parser(__doc__)
    ap.add_argument("--timer", choices=TIMERS, default="events")
    ap.add_argument("--runs", type=int, default=3, help="fresh compiles a problem")
    ap.add_argument("--variants", help="measure_tb.py's --variants [all]")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a run")
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--json-out", type=Path, help="one JSON line a run, written as each run ends")
    ap.add_argument("--baselines-out", type=Path, help="one T_b record a problem: its fastest run")
    ap.add_argument("--from-runs", type=Path, help="render these --json-out lines instead of measuring")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    problems = [p for arg in a.problems for p in find_problems(arg)]
    if not problems:
        ap.error(f"no problem under {' '.join(map(str, a.problems))}")
    runs: list[Run] = read_runs(a.from_runs, problems) if a.from_runs else []
    if a.json_out and not a.from_runs:
        a.json_out.write_text("")
    def write_outputs() -> str:  # after every problem: a run cut by a time limit keeps what it measured
        text = render(runs, a.device, a.timer)
        if a.baselines_out:
            a.baselines_out.write_text("".join(json.dumps(r) + "\n" for r in fastest_runs(runs)))
        if a.output:
            a.output.write_text(text)
        return text

    with tempfile.TemporaryDirectory(prefix="tb_stability.") as scratch:
        for problem in problems if not a.from_runs else ():
            for i in range(1, a.runs + 1):
                r = one_run(problem, i, Path(scratch), a)
                runs.append(r)
                t = f"{r.t_b_ms * 1e3:.2f} us ({r.best_variant})" if r.t_b_ms is not None else f"failed: {r.error}"
                print(f"{problem.name} run {i}/{a.runs}: T_b {t}, {len(r.configs)} autotuned kernels", flush=True)
                if a.json_out:
                    with a.json_out.open("a") as f:
                        f.write(json.dumps(r.__dict__ | {"configs": list(r.configs)}) + "\n")
            write_outputs()
    print(write_outputs(), end="")
    return 0 if all(r.error is None for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
