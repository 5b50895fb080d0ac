"""Why a Python-launched candidate costs more host time in the judge's worker than in a plain process.

For each candidate (the offline agent's first proposals of one problem) the same measurements as
``bench/launch_profile.py`` (host µs per call, judged µs with the pre-roll) are taken three ways:

- ``inproc``: in this process, tensors allocated here;
- ``ipc``: in a spawned process that received the tensors over CUDA IPC, as the judge's worker does;
- ``ipc+sandbox``: the same, after ``sol_bench.sandbox.apply`` (Landlock), as the judge's worker does;
- ``+idle``: the parent pauses 1.5 ms before each request (the judge's refill and checks take about that);
- ``+judge``: the parent does GPU work in its own context before each request, as the judge does;
- ``+reset``: each timed call also preceded by the worker's persisting-L2 reset;
- ``msg``: each timed call triggered by a message from the parent, as the judge drives its worker (the
  child blocks in ``recv`` between calls); ``msg+reset`` is the worker's whole sequence; ``msg+reset+poll``
  the same with the child spinning on ``poll`` instead of sleeping in ``recv``.

``fast`` counts the Triton templates' cached launches (0: every call went through Triton's JIT path).

    python bench/worker_launch_diag.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
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


MODES = {  # name: (sandboxed, reset persisting L2 per call, one message per call, spin on poll, judge GPU work,
    #         the parent's turnaround in ms between a reply and the next request)
    "ipc": (False, False, False, False, False, 0.0),
    "ipc+sandbox": (True, False, False, False, False, 0.0),
    "ipc+sandbox+reset": (True, True, False, False, False, 0.0),
    "msg": (True, False, True, False, False, 0.0),
    "msg+poll": (True, False, True, True, False, 0.0),
    "msg+reset": (True, True, True, False, False, 0.0),
    "msg+reset+poll": (True, True, True, True, False, 0.0),
    "msg+judge": (True, False, True, False, True, 0.0),
    "msg+reset+judge": (True, True, True, False, True, 0.0),
    "msg+idle": (True, False, True, False, False, 1.5),
    "msg+idle+poll": (True, False, True, True, False, 1.5),
}


def _worker_sequence(fn, args, device, conn, reset: bool, per_message: bool, poll: bool, n: int = 60):
    """The judge worker's steps around one timed call, ``n`` times: host µs of the call, judged µs."""
    import time

    from sol_bench.timing import LAUNCH_PREROLL_US, CudaTimer, L2Flusher
    from sol_bench.worker import _Persisting

    timer, flusher, persisting = CudaTimer(device, LAUNCH_PREROLL_US), L2Flusher(device), _Persisting()
    host, judged = [], []

    def call():
        t0 = time.perf_counter()
        fn(*args)
        host.append((time.perf_counter() - t0) * 1e6)

    for _ in range(n):
        if per_message:
            while poll and not conn.poll(0):
                pass
            conn.recv()
        if reset:
            persisting.reset()
        flusher.flush()
        torch.cuda.synchronize(device)
        judged.append(timer.time(call)[0] * 1e3)
        torch.cuda.synchronize(device)
        if per_message:
            conn.send(("timed", judged[-1]))
    return statistics.median(host[5:]), statistics.median(judged[5:])


def _child(sol_json: str, staging: str, args, mode: str, conn, q) -> None:
    try:
        from launch_profile import load_candidate

        from sol_bench import sandbox
        from sol_bench.models import Solution

        sandboxed, reset, per_message, poll, _, _ = MODES[mode]
        device = args[0].device
        torch.cuda.set_device(device)
        if sandboxed:
            sandbox.apply(sandbox.SandboxPolicy(writable=(Path(staging), Path("/dev/shm"), Path("/tmp"))))
        torch.set_grad_enabled(False)
        fn = load_candidate(Solution.model_validate_json(sol_json), str(device), Path(staging))
        if not (reset or per_message):
            q.put(("ok", _measure(fn, args, device)))
            return
        for _ in range(5):
            fn(*args)
        h, j = _worker_sequence(fn, args, device, conn, reset, per_message, poll)
        q.put(("ok", (h, j, _fast_entries(fn))))
    except Exception as e:  # noqa: BLE001 - reported by the parent
        q.put(("fail", f"{type(e).__name__}: {str(e)[:300]}"))


def _drive(conn, p, device, judge_gpu: bool, idle_ms: float, n: int = 60) -> None:
    """The judge's side of ``msg`` modes: one request per timed call, the next sent when the reply came.
    ``judge_gpu``: before each request, GPU work in this process's own context, as the judge refills the
    inputs of every timed call (the GPU then switches contexts between the judge and the worker);
    ``idle_ms``: then a pause, as the judge's bookkeeping between timed calls leaves the worker idle."""
    import time

    buf = torch.empty(4 << 20, device=device) if judge_gpu else None
    for _ in range(n):
        if buf is not None:
            buf.normal_()
            torch.cuda.synchronize(device)
        if idle_ms:
            time.sleep(idle_ms / 1e3)
        conn.send(("time", 0))
        while not conn.poll(1.0):
            if not p.is_alive():
                return
        conn.recv()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    if unknown := set(a.modes.split(",")) - set(MODES):
        ap.error(f"unknown --modes {sorted(unknown)}; known: {', '.join(MODES)}")
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
        for mode in a.modes.split(","):
            q = ctx.Queue()
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_child, args=(sol.model_dump_json(), str(a.staging_root), args, mode, theirs, q))
            p.start()
            if MODES[mode][2]:
                _drive(mine, p, device, MODES[mode][4], MODES[mode][5])
            status, res = q.get(timeout=300)
            p.join(30)
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
