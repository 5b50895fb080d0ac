"""Judge overhead per candidate and run-to-run spread of the reported latency.

1. Overhead: one candidate (PyTorch, and CUDA C++ on a GPU) on a 10-workload RMSNorm problem; the
   judge's wall seconds per phase (compile, worker start, correctness, timing, reference timing).
2. Spread: small and large RMSNorm (1024x4096, 16384x4096 bf16) and a ~1 ms bf16 matmul (8192x8192x5632)
   as PyTorch candidates, plus on a GPU the CUDA C++ RMSNorm at 4096x4096 (~50 us) and 12288x4096 bf16,
   each judged --repeats times in fresh judge runs; min / median / max of the reported median latency.

Usage:  python bench/judge_overhead.py --device cuda --out /tmp/judge_overhead.md
        python bench/judge_overhead.py --device cpu --small      (a quick check on a CPU)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from sol_bench.judge import JudgeConfig, evaluate
from sol_bench.models import Solution
from report_text import emit_report
from sol_bench.problem import load_problem

RMS_REF = """import torch

def run(x, weight, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)
"""
MM_REF = """import torch

def run(a, b):
    return a @ b
"""


def write_problem(root: Path, name: str, definition: dict, workloads: list[dict]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps({"name": name, **definition}))
    (d / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return d


def rms_problem(root: Path, name: str, H: int, tokens: list[int]) -> Path:
    definition = {
        "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": H}},
        "inputs": {"x": {"shape": ["T", "H"], "dtype": "bfloat16"}, "weight": {"shape": ["H"], "dtype": "bfloat16"},
                   "eps": {"shape": None, "dtype": "float32"}},
        "outputs": {"y": {"shape": ["T", "H"], "dtype": "bfloat16"}},
        "reference": RMS_REF,
    }  # fmt: skip
    wl = [{"uuid": f"T{t}", "axes": {"T": t}, "inputs": {"eps": {"type": "scalar", "value": 1e-6}},
           "tolerance": {"max_atol": 2e-2, "max_rtol": 2e-2}} for t in tokens]  # fmt: skip
    return write_problem(root, name, definition, wl)


def mm_problem(root: Path, name: str, M: int, N: int, K: int) -> Path:
    definition = {
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": N}, "K": {"type": "const", "value": K}},
        "inputs": {"a": {"shape": ["M", "K"], "dtype": "bfloat16"}, "b": {"shape": ["K", "N"], "dtype": "bfloat16"}},
        "outputs": {"c": {"shape": ["M", "N"], "dtype": "bfloat16"}},
        "reference": MM_REF,
    }  # fmt: skip
    wl = [{"uuid": f"M{M}", "axes": {"M": M}, "tolerance": {"max_atol": 1.0, "max_rtol": 5e-2}}]
    return write_problem(root, name, definition, wl)


def pytorch_solution(problem: str, body: str, params: str) -> Solution:
    src = f"import torch\n\ndef run({params}):\n{body}"
    return Solution.model_validate({
        "name": f"{problem}-pytorch", "definition": problem,
        "spec": {"languages": ["pytorch"], "entry_point": "kernel.py::run", "destination_passing_style": False},
        "sources": [{"path": "kernel.py", "content": src}],
    })  # fmt: skip


RMS_BODY = "    xf = x.float()\n    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)\n"


def cuda_solution(problem: str) -> Solution:
    fixture = Path(__file__).resolve().parent.parent / "tests/fixtures/solutions/rmsnorm_cuda_ptx.json"
    data = json.loads(fixture.read_text())
    data["definition"] = problem
    data["spec"]["destination_passing_style"] = True
    return Solution.model_validate(data)


def phases(traces) -> dict[str, float]:
    return dict(traces[-1].evaluation.phase_seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="tiny sizes, for a CPU check of the script")
    ap.add_argument("--staging-root", type=Path, help="reuse builds from this staging root")
    ap.add_argument("--skip-overhead", action="store_true", help="only the spread table")
    ap.add_argument("--spread-filter", help="only spread cases whose label contains this text")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="judge-bench-"))
    stage = args.staging_root or root / "staging"
    lines = [f"# Judge overhead and latency spread ({args.device}, {time.strftime('%Y-%m-%d')})", ""]

    tokens = [1, 7, 32, 64, 128, 333, 512, 1024, 2048, 4097] if not args.small else [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    p10 = load_problem(rms_problem(root, "rms10", 4096 if not args.small else 256, tokens))
    cfg = JudgeConfig(device=args.device, staging_root=stage)
    cands = [("pytorch", pytorch_solution("rms10", RMS_BODY, "x, weight, eps"))]
    if args.device.startswith("cuda"):
        cands.append(("cuda_cpp", cuda_solution("rms10")))
    lines += ["## Overhead per candidate, 10-workload problem (judge wall seconds)", "",
              "| candidate | total s | compile | worker start | correctness | timing | reference timing | statuses |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for label, sol in [] if args.skip_overhead else cands:
        t0 = time.monotonic()
        tr = evaluate(p10, sol, cfg)
        total = time.monotonic() - t0
        ph = phases(tr)
        st = ",".join(sorted({t.evaluation.status.value for t in tr}))
        lines.append(f"| {label} | {total:.1f} | {ph.get('compile', 0):.1f} | {ph.get('start', 0):.1f} | "
                     f"{ph.get('correctness', 0):.1f} | {ph.get('timing', 0):.1f} | {ph.get('reference', 0):.1f} | {st} |")  # fmt: skip
        print(lines[-1], flush=True)

    def torch_sol(body: str, params: str):
        return lambda name: pytorch_solution(name, body, params)

    rms_torch = torch_sol(RMS_BODY, "x, weight, eps")
    if args.small:
        spread_cases = [("rms 64x256", rms_problem(root, "rms_s", 256, [64]), rms_torch)]
    else:
        spread_cases = [
            ("rmsnorm 1024x4096 bf16 (small)", rms_problem(root, "rms_small", 4096, [1024]), rms_torch),
            ("rmsnorm 16384x4096 bf16", rms_problem(root, "rms_big", 4096, [16384]), rms_torch),
            ("matmul 8192x8192x5632 bf16", mm_problem(root, "mm_1ms", 8192, 8192, 5632), torch_sol("    return a @ b\n", "a, b")),
        ]  # fmt: skip
        if args.device.startswith("cuda"):
            spread_cases += [
                ("CUDA C++ rmsnorm 4096x4096 bf16 (~50 us kernel)", rms_problem(root, "rms_50us", 4096, [4096]), cuda_solution),
                ("CUDA C++ rmsnorm 12288x4096 bf16", rms_problem(root, "rms_150us", 4096, [12288]), cuda_solution),
            ]  # fmt: skip
    if args.spread_filter:
        spread_cases = [c for c in spread_cases if args.spread_filter in c[0]]
    lines += ["", f"## Run-to-run spread of the reported median latency ({args.repeats} fresh judge runs each)", "",
              "| kernel | min ms | median ms | max ms | (max-min)/median | typical IQR ms | reference ms | SM MHz |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for label, pdir, make_solution in spread_cases:
        p = load_problem(pdir)
        sol = make_solution(p.name)
        meds, iqrs, refs, clocks = [], [], [], []
        for _ in range(args.repeats):
            tr = evaluate(p, sol, cfg)[0]
            perf = tr.evaluation.performance
            if perf is None:
                raise SystemExit(f"{label}: {tr.evaluation.status.value} {tr.evaluation.reason}")
            meds.append(perf.latency_ms)
            iqrs.append(perf.latency_iqr_ms or 0.0)
            refs.append(perf.reference_latency_ms)
            clocks.append(perf.sm_clock_mhz or 0.0)
        med = statistics.median(meds)
        lines.append(f"| {label} | {min(meds):.4f} | {med:.4f} | {max(meds):.4f} | {(max(meds) - min(meds)) / med:.1%} | "
                     f"{statistics.median(iqrs):.4f} | {statistics.median(refs):.4f} | {statistics.median(clocks):.0f} |")  # fmt: skip
        print(lines[-1], flush=True)
    emit_report(lines, args.out)


if __name__ == "__main__":
    main()
