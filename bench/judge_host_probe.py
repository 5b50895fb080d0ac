"""Host time of one Triton template call measured inside the judge's own worker.

Wraps the offline agent's first Triton candidate for a problem so that every call records its host time
(perf_counter around the template's ``run``) and how many launches the template's ``_Launcher`` has cached;
the log goes to the candidate's working directory (its staging ``run`` directory, the one place it may
write). The judge then runs it as any candidate; the script prints the judge's latency and the log.

    python bench/judge_host_probe.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

_PROBE = '''

# ---- judge_host_probe: host time per call, from inside the judge's worker ----
import os as _os
import time as _time

_probe_run, _probe_times = run, []


def run(*args):
    t0 = _time.perf_counter()
    _probe_run(*args)
    _probe_times.append((_time.perf_counter() - t0) * 1e6)
    if len(_probe_times) % 8 == 0:
        cached = sum(len(v.compiled) for v in globals().values() if type(v).__name__ == "_Launcher")
        with open(_os.path.join(_os.getcwd(), "host_probe.txt"), "a") as f:
            f.write(" ".join(f"{t:.1f}" for t in _probe_times[-8:]) + f" cached={cached}\\n")
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("--pin", default="1", help="comma-separated JudgeConfig.pin_worker_cpus values (0/1), one run each")
    ap.add_argument("--repeat", type=int, default=1, help="judge runs per --pin value (a new worker each)")
    a = ap.parse_args()
    from bench_offline_agents import likely_candidates

    from sol_bench.judge import JudgeConfig, evaluate
    from sol_bench.models import Solution
    from sol_bench.problem import load_problem
    from sol_bench.staging import stage

    problem = load_problem(a.problem)
    problem = problem.select(problem.smallest_workloads(1))
    sol = next(s for s in likely_candidates(problem, a.device, 6) if "triton" in s.spec.languages)
    data = sol.model_dump(mode="json")
    data["name"] += "__host_probe"
    entry = sol.spec.entry_file
    for s in data["sources"]:
        if s["path"] == entry:
            s["content"] += _PROBE
    probed = Solution.model_validate(data)
    import torch

    from sol_bench.affinity import format_cpulist, gpu_local_cpus, pci_address

    dev = torch.device(a.device)
    local = gpu_local_cpus(dev)
    print(f"GPU {pci_address(dev)}: local CPUs {format_cpulist(local) if local else 'unknown'} "
          f"of {format_cpulist(frozenset(os.sched_getaffinity(0)))}")  # fmt: skip
    runs = [bool(int(x)) for _ in range(a.repeat) for x in a.pin.split(",")]  # interleaved: drift hits both
    for pin in runs:
        mode = "pinned" if pin else "unpinned"
        log = stage(probed, a.staging_root).run / "host_probe.txt"
        log.unlink(missing_ok=True)
        cfg = JudgeConfig(device=a.device, staging_root=a.staging_root, pin_worker_cpus=pin)
        for t in evaluate(problem, probed, cfg):
            perf = t.evaluation.performance
            print(f"{mode}:", t.workload.uuid, t.evaluation.status.value, "latency ms",
                  perf.latency_ms if perf else None)  # fmt: skip
        lines = log.read_text().splitlines() if log.exists() else []
        print(f"{sol.name}, {mode}: {len(lines)} log lines from the worker")
        for line in lines:
            print("  ", line)
        times = [float(x) for line in lines[2:] for x in line.split()[:-1]]  # from the 17th call: timed ones
        if times:
            print(f"{mode}: host µs per timed call inside the worker: median {statistics.median(times):.1f}, "
                  f"min {min(times):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
