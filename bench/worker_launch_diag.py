"""Why a Python-launched candidate costs more host time in the judge's worker than in a plain process.

For each candidate (the offline agent's first proposals of one problem) the same measurements as
``bench/launch_profile.py`` (host µs per call, judged µs with the pre-roll) are taken three ways:

- ``inproc``: in this process, tensors allocated here;
- ``ipc``: in a spawned process that received the tensors over CUDA IPC, as the judge's worker does;
- ``ipc+sandbox``: the same, after ``sol_bench.sandbox.apply`` (Landlock), as the judge's worker does.

``fast`` counts the Triton templates' cached launches (0: every call went through Triton's JIT path).

    python bench/worker_launch_diag.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402
import torch.multiprocessing as tmp  # noqa: E402


def _fast_entries(fn) -> int:
    g = getattr(fn, "__globals__", {})
    return sum(len(v.compiled) for v in g.values() if type(v).__name__ == "_Launcher")


def _measure(fn, args, device) -> tuple[float, float, int]:
    """Host µs per call and the judge's protocol in this process (as bench/launch_profile.py measures)."""
    from launch_profile import host_us

    from sol_bench.timing import LAUNCH_PREROLL_US, time_callable

    call = lambda: fn(*args)  # noqa: E731
    for _ in range(5):
        call()
    judged = time_callable(call, device, 5, 30, True, None, LAUNCH_PREROLL_US).median_ms * 1e3
    return host_us(call, device), judged, _fast_entries(fn)


def _child(sol_json: str, staging: str, args, sandboxed: bool, q) -> None:
    try:
        from launch_profile import load_candidate

        from sol_bench import sandbox
        from sol_bench.models import Solution

        device = args[0].device
        torch.cuda.set_device(device)
        if sandboxed:
            sandbox.apply(sandbox.SandboxPolicy(writable=(Path(staging), Path("/dev/shm"), Path("/tmp"))))
        torch.set_grad_enabled(False)
        fn = load_candidate(Solution.model_validate_json(sol_json), str(device), Path(staging))
        q.put(("ok", _measure(fn, args, device)))
    except Exception as e:  # noqa: BLE001 - reported by the parent
        q.put(("fail", f"{type(e).__name__}: {str(e)[:300]}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    from bench_offline_agents import likely_candidates
    from launch_profile import load_candidate

    from sol_bench.inputs import make_inputs, output_specs
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference

    device = torch.device(a.device)
    torch.set_grad_enabled(False)
    problem = load_problem(a.problem)
    w = problem.workloads[0]
    inputs = list(make_inputs(problem.definition, w, device, 7, load_reference(problem.definition)).values())
    outs = [torch.empty(s, dtype=d, device=device) for s, d in output_specs(problem.definition, w).values()]
    ctx = tmp.get_context("spawn")
    lines = ["| candidate | mode | host µs | judged µs | fast launches cached |", "|---|---|---:|---:|---:|"]
    for sol in likely_candidates(problem, str(device), a.candidates):
        args = inputs + outs if sol.spec.destination_passing_style else inputs
        name = sol.name.split("__", 1)[-1]
        try:
            fn = load_candidate(sol, str(device), a.staging_root)  # builds C++ once; the children find it
            h, j, f = _measure(fn, args, device)
            lines.append(f"| {name} | inproc | {h:.1f} | {j:.1f} | {f} |")
        except Exception as e:  # noqa: BLE001
            lines.append(f"| {name} | inproc | failed: {type(e).__name__}: {str(e)[:120]} | | |")
            continue
        for sandboxed in (False, True):
            q = ctx.Queue()
            p = ctx.Process(target=_child, args=(sol.model_dump_json(), str(a.staging_root), args, sandboxed, q))
            p.start()
            status, res = q.get(timeout=300)
            p.join(30)
            mode = "ipc+sandbox" if sandboxed else "ipc"
            if status == "ok":
                lines.append(f"| {name} | {mode} | {res[0]:.1f} | {res[1]:.1f} | {res[2]} |")
            else:
                lines.append(f"| {name} | {mode} | failed: {res} | | |")
        print("\n".join(lines), flush=True)
    text = f"# Worker launch diagnosis: {problem.name} ({torch.cuda.get_device_name(device)})\n\n" + "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
