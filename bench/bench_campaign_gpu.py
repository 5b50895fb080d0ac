"""Throughput of ``solforge run`` on one GPU versus all visible GPUs.

For each GPU set (``--gpus 0 --gpus 0,1``) runs the same campaign (offline agents, fresh data directory)
with ``CUDA_VISIBLE_DEVICES`` set to it, samples every GPU's utilisation through NVML every 100 ms while
it runs, and counts the candidates the run stored a verdict for. Reports wall time, candidates judged,
candidates per GPU-minute, the judge-slot occupancy (judge seconds / (judging window x GPUs)), the kernel-time
share of each GPU (mean NVML utilisation) and the
throughput ratio to the first GPU set. Writes a Markdown table to --out.

    python bench/bench_campaign_gpu.py data/problems/<p1> ... --gpus 0 --gpus 0,1 --max-candidates 4 \
        --out /tmp/campaign.md
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from report_text import emit_report

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Sampler:
    """Polls NVML utilisation of the given physical GPU indices on a background thread."""

    indices: list[int]
    period_s: float = 0.1
    samples: dict[int, list[int]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
        self.samples = {i: [] for i in self.indices}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for i, h in self._handles.items():
                self.samples[i].append(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu)
            time.sleep(self.period_s)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def busy_fraction(self, i: int) -> float:
        # NVML's utilisation is the share of its last sample period in which a kernel ran.
        s = self.samples[i]
        return sum(s) / (100 * len(s)) if s else 0.0


def judged_candidates(data_dir: Path) -> tuple[int, int, float, float]:
    """(candidates with a stored trace, traces, judge seconds, judging window seconds) of the run.

    Each trace carries its share of its candidate's judge run (wall / workloads), so a candidate's judge
    seconds are the sum over its traces. The window runs from the first judge start to the last stored
    verdict, leaving out the run's fixed start-up (Prefect server, cluster, imports).
    """
    import pyarrow.dataset as ds

    traces = data_dir / "tables" / "traces"
    files = [str(p) for p in traces.rglob("part-*.parquet")]
    if not files:
        return 0, 0, 0.0, 0.0
    table = ds.dataset(files, format="parquet").to_table(columns=["candidate_id", "judge_s", "created_at"])
    judge_s: dict[str, float] = {}
    stored: dict[str, float] = {}
    for cid, s, at in zip(*(table.column(c).to_pylist() for c in ("candidate_id", "judge_s", "created_at"))):
        judge_s[cid] = judge_s.get(cid, 0.0) + (s or 0.0)
        stored[cid] = max(stored.get(cid, 0.0), at.timestamp())
    start = min(stored[c] - judge_s[c] for c in stored)
    return len(judge_s), table.num_rows, sum(judge_s.values()), max(stored.values()) - start


def run_campaign(problems: list[str], gpus: str, args: argparse.Namespace, work: Path) -> dict:
    data_dir = work / f"data-gpus-{gpus.replace(',', '_')}"
    if args.staging_root:
        # Every run starts from the same warm build cache, so the ratio measures judging, not nvcc.
        data_dir.mkdir(parents=True)
        (data_dir / "kernels_tmp").symlink_to(args.staging_root.resolve(), target_is_directory=True)
    cmd = [sys.executable, "-m", "solforge", "run", *problems, "--device", "cuda", "--agent", "offline",
           "--max-candidates", str(args.max_candidates), "--data-dir", str(data_dir), "--run-id", "bench"]  # fmt: skip
    if args.max_workloads:
        cmd += ["--max-workloads", str(args.max_workloads)]
    if args.iterations:
        cmd += ["--iterations", str(args.iterations)]
    if args.language:
        cmd += ["--language", args.language]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpus}
    indices = [int(g) for g in gpus.split(",")]
    log = work / f"run-gpus-{gpus.replace(',', '_')}.log"
    with Sampler(indices) as sampler, log.open("w") as out:
        t0 = time.monotonic()
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO).returncode
        wall = time.monotonic() - t0
    cands, traces, judge_s, window_s = judged_candidates(data_dir)
    if rc != 0:
        print(log.read_text()[-4000:], file=sys.stderr)
    return {"gpus": gpus, "rc": rc, "wall_s": wall, "candidates": cands, "traces": traces, "judge_s": judge_s, "window_s": window_s,
            "busy": {i: sampler.busy_fraction(i) for i in indices}, "log": str(log)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--gpus", action="append", required=True, help="a CUDA_VISIBLE_DEVICES value (repeatable)")
    ap.add_argument("--max-candidates", type=int, default=4, help="candidates per problem (solforge run's cap)")
    ap.add_argument("--language", help="the language the offline agents write")
    ap.add_argument("--max-workloads", type=int, default=None)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--staging-root", type=Path,
                    help="a judge staging root with C++ builds to start every run from (the campaign's is "
                         "<data-dir>/kernels_tmp)")  # fmt: skip
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="campaign-bench-"))
    rows = []
    for gpus in args.gpus:
        r = run_campaign(args.problems, gpus, args, work)
        rows.append(r)
        print(r, flush=True)
    base = rows[0]
    base_rate = base["candidates"] / base["wall_s"] if base["wall_s"] else 0.0
    base_window_rate = base["candidates"] / base["window_s"] if base["window_s"] else 0.0
    lines = [f"# solforge run throughput, {len(args.problems)} problems, at most {args.max_candidates} candidates "
             f"per problem ({time.strftime('%Y-%m-%d')})", "",
             "| GPUs | exit | wall s | judging window s | candidates judged | traces | candidates / GPU-minute "
             "| judge-slot occupancy (window) | NVML kernel-time share | throughput vs first (whole run) | (window) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        n = len(r["busy"])
        per_gpu_min = r["candidates"] / (r["wall_s"] / 60 * n) if r["wall_s"] else 0.0
        rate = r["candidates"] / r["wall_s"] if r["wall_s"] else 0.0
        busy = ", ".join(f"gpu{i} {b:.0%}" for i, b in r["busy"].items())
        ratio = rate / base_rate if base_rate else 0.0
        occupancy = r["judge_s"] / (r["window_s"] * n) if r["window_s"] else 0.0
        window_ratio = (r["candidates"] / r["window_s"]) / base_window_rate if r["window_s"] and base_window_rate else 0.0
        lines.append(f"| {r['gpus']} | {r['rc']} | {r['wall_s']:.0f} | {r['window_s']:.0f} | {r['candidates']} | "
                     f"{r['traces']} | {per_gpu_min:.1f} | {occupancy:.0%} | {busy} | {ratio:.2f}x | {window_ratio:.2f}x |")  # fmt: skip
    emit_report(lines, args.out)


if __name__ == "__main__":
    main()
