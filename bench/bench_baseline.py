"""Baseline table: eager vs T_b vs T_SOL per workload, as markdown.

Runs ``solforge baseline`` and ``solforge sol`` over a problems directory and writes one table row per
workload: problem, uuid, eager ms, T_b ms, best variant, T_SOL ms, and T_b / T_SOL (the headroom a kernel
has over the optimized PyTorch baseline).

    python bench/bench_baseline.py tests/fixtures/problems --device cpu --output /tmp/baselines.md
    python bench/bench_baseline.py data/problems --device cuda --hardware H200 --output docs/baselines_h200.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = [sys.executable, "-c", "from solforge.cli import main; main()"]


def _json_lines(argv: list[str]) -> list[dict]:
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{' '.join(argv[:1])} failed with exit code {proc.returncode}")
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="Problem directories or directories of problems.")
    ap.add_argument("--output", "-o", type=Path, required=True, help="Markdown file to write.")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N.")
    ap.add_argument("--hardware", default="H200", help="SOL hardware model (B200, H200, H100, measured, auto).")
    ap.add_argument("--data-dir", type=Path, help="Where baselines are stored [a temporary directory].")
    ap.add_argument("--variants", help="Comma-separated baseline variants [all the device supports].")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--max-workloads", type=int, help="Only the N smallest workloads of each problem.")
    ap.add_argument("--records", type=Path,
                    help="Render from these saved `solforge baseline --json` lines instead of measuring (T_SOL is "
                         "computed here: it needs no GPU).")  # fmt: skip
    ap.add_argument("--json-out", type=Path, help="Also write {workload uuid: T_b ms} here (for bench_offline_agents).")
    args = ap.parse_args()
    problems = [str(p) for p in args.problems]

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp)
        base_argv = ["baseline", *problems, "--device", args.device, "--data-dir", str(data_dir), "--json",
                     "--warmup", str(args.warmup), "--iterations", str(args.iterations)]  # fmt: skip
        if args.variants:
            base_argv += ["--variants", args.variants]
        if args.max_workloads:
            base_argv += ["--max-workloads", str(args.max_workloads)]
        if args.records:
            baselines = [json.loads(line) for line in args.records.read_text().splitlines() if line.startswith("{")]
        else:
            baselines = _json_lines(base_argv)
        sols = _json_lines(["sol", *problems, "--hardware", args.hardware, "--device", args.device, "--json"])

    sol_by_key = {(s["problem"], s["uuid"]): s for s in sols}
    device = baselines[0]["device_name"] if baselines else args.device
    lines = [
        f"Baselines on {device}; T_SOL on the {args.hardware} model "
        f"(warmup {args.warmup}, {args.iterations} timed iterations, median).",
        "",
        "| problem | uuid | eager ms | T_b ms | best variant | T_SOL ms | eager / T_b | T_b / T_SOL |",
        "|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for b in baselines:
        s = sol_by_key.get((b["problem"], b["uuid"]), {})
        t_sol = s.get("t_sol_ms")
        sol_cell = f"{t_sol:.4g}" if t_sol is not None else f"n/a ({s.get('error', 'not analysed')[:60]})"
        headroom = f"{b['t_b_ms'] / t_sol:.1f}x" if t_sol else "n/a"
        lines.append(
            f"| {b['problem']} | {b['uuid']} | {b['eager_ms']:.4f} | {b['t_b_ms']:.4f} | {b['best_variant']} | "
            f"{sol_cell} | {b['eager_ms'] / b['t_b_ms']:.2f}x | {headroom} |"
        )
    failed = sorted({f"{b['problem']}/{b['uuid']}: {k}: {v}" for b in baselines for k, v in b["failed"].items()})
    if failed:
        lines += ["", "Variants not counted:", ""] + [f"- {f}" for f in failed]
    text = "\n".join(lines) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    if args.json_out:
        args.json_out.write_text(json.dumps({b["uuid"]: b["t_b_ms"] for b in baselines}, indent=1) + "\n")
    print(text, end="")


if __name__ == "__main__":
    main()
