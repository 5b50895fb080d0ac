"""Does a buffer's origin change a kernel's judged time? The same compiled call on three buffer sets.

The judge's worker reads inputs and writes outputs in buffers the judge allocated in its own process (a
``torch.cuda.MemPool``, passed as CUDA IPC handles). T_b is timed in one process on buffers of its own. On
one-kernel problems the same Inductor kernel has read 0.1-0.4 µs slower judged than in-process (sessions 9,
10, 14). This separates the buffers from everything else: a child process times one call, the reference
compiled together with its copy into the outputs and replayed as a CUDA graph (the reference-derived
candidate's form), with the judge's protocol (``time_callable``: L2 flush, ``--timer``), on

- ``ipc``: the parent's MemPool buffers, received as IPC handles (what the judge's worker gets);
- ``pool``: copies in a MemPool of the child's own;
- ``local``: copies from the child's caching allocator (what T_b uses);

in interleaved rounds, so drift on the device hits every set alike. Per problem: the median of each set's
round medians, and each set's difference from ``local``.

    python bench/ipc_offset.py data/problems/L1/gelu_quick_f4096_tok257_bf16 --device cuda -o /tmp/ipc.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

SETS = ("ipc", "pool", "local")


def _child(conn, problem_dir: str, device: str, rounds: int, iterations: int, timer: str) -> None:
    import torch

    from agents.offline import replay
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference
    from sol_bench.timing import time_callable

    try:
        dev = torch.device(device)
        dev = torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
        torch.cuda.set_device(dev)
        problem = load_problem(Path(problem_dir))
        ref = load_reference(problem.definition)
        ipc_in, ipc_out = conn.recv()
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            pool_in = [t.clone() if isinstance(t, torch.Tensor) else t for t in ipc_in]
            pool_out = [torch.empty_like(o) for o in ipc_out]
        local_in = [t.clone() if isinstance(t, torch.Tensor) else t for t in ipc_in]
        local_out = [torch.empty_like(o) for o in ipc_out]
        fn = torch.compile(replay._into(ref.run, len(ipc_out)), dynamic=False)
        args = {"ipc": [*ipc_in, *ipc_out], "pool": [*pool_in, *pool_out], "local": [*local_in, *local_out]}
        calls = {k: (lambda a=a: replay._replay_graph(lambda: fn(*a), a, warmups=3)) for k, a in args.items()}
        with torch.no_grad():
            for call in calls.values():
                call()
            torch.cuda.synchronize(dev)
            same = all(torch.equal(args["local"][-1], args[k][-1]) for k in SETS)
            medians: dict[str, list[float]] = {k: [] for k in SETS}
            for _ in range(rounds):
                for k in SETS:
                    stats = time_callable(calls[k], dev, 5, iterations, True, None, timer=timer)
                    medians[k].append(stats.median_ms * 1e3)
        conn.send(("ok", medians, same))
    except Exception as e:  # noqa: BLE001 - the parent reports it
        conn.send(("fail", f"{type(e).__name__}: {e}", False))


def measure(problem_dir: Path, device: str, rounds: int, iterations: int, timer: str) -> tuple[dict, bool]:
    """{set: [round medians, µs]} and whether the three sets' outputs agree."""
    import torch.multiprocessing as mp

    from sol_bench.inputs import make_inputs, output_specs
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference

    problem = load_problem(problem_dir)
    [w] = problem.select(problem.pick_workloads(1, "smallest")).workloads
    ref = load_reference(problem.definition)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        inputs = list(make_inputs(problem.definition, w, device, 1234, ref).values())
        outputs = [torch.empty(s, dtype=d, device=device) for s, d in output_specs(problem.definition, w).values()]
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child, str(problem_dir), device, rounds, iterations, timer))
    proc.start()
    parent.send((inputs, outputs))
    status, result, same = parent.recv()
    proc.join(timeout=60)
    if status != "ok":
        raise RuntimeError(f"{problem.name}: {result}")
    return result, same


def table(rows: list[tuple[str, dict, bool]]) -> str:
    lines = ["| problem | " + " | ".join(f"{k} µs" for k in SETS) + " | ipc − local | pool − local | outputs agree |",
             "|---|" + "---:|" * (len(SETS) + 2) + "---|"]  # fmt: skip
    for name, medians, same in rows:
        med = {k: statistics.median(v) for k, v in medians.items()}
        cells = " | ".join(f"{med[k]:.2f}" for k in SETS)
        lines.append(f"| {name} | {cells} | {med['ipc'] - med['local']:+.2f} | {med['pool'] - med['local']:+.2f} | "
                     f"{'yes' if same else 'no'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", default="cupti")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    if not a.device.startswith("cuda") or not torch.cuda.is_available():
        ap.error("ipc_offset compares CUDA buffers: it needs a CUDA device")
    rows = []
    for p in a.problems:
        medians, same = measure(p, a.device, a.rounds, a.iterations, a.timer)
        rows.append((p.name, medians, same))
        print(table(rows[-1:]), flush=True)
        if a.out:
            a.out.write_text(f"# Buffer origin vs judged time ({torch.cuda.get_device_name(a.device)})\n\n" + table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
