"""Inductor's numerics checked against the eager reference before a candidate is offered.

``torch.compile`` does not always stay within a problem's tolerance of eager (reordered reductions, fused
casts, other matmul kernels), and an exported module can disagree where the compile did not. A candidate
built on Inductor is run here first, as the judge would run it (its own files, its entry point, destination
buffers poisoned with NaN), on the problem's smallest workload, and compared with the eager reference under
that workload's tolerance, with the judge's comparison. It runs in a child process on a time box: a compile
that hangs is killed with its process group, the agent's process keeps no Inductor or CUDA-graph state, and
the candidate sees torch's default precision flags, as in the judge's worker.

Where: on the target device when this process has it; on the CPU only when the target is the CPU (there
Inductor's C++ backend is what the judge runs). A GPU target from a process without a GPU is not checked.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from sol_bench.correctness import compare
from sol_bench.dtypes import nbytes
from sol_bench.inputs import make_inputs, output_specs
from sol_bench.models import Solution, Workload
from sol_bench.problem import Problem, load_problem
from sol_bench.reference import load_reference

_SEEDS = (11, 12)  # one round per seed: fresh inputs each, as the judge's correctness rounds
_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Outcome:
    """The check's verdict: ``ok``, or why not (which workload, which output, how far off)."""

    ok: bool
    reason: str = ""
    seconds: float = 0.0


def check_device(device: str) -> str | None:
    """Where candidates for ``device`` can be checked from this process, or None."""
    if device.startswith("cuda"):
        return device if torch.cuda.is_available() else None
    return "cpu" if device == "cpu" else None


def smallest_workload(problem: Problem) -> Workload:
    """The workload whose tensor inputs hold the fewest bytes (the first of equals)."""
    d = problem.definition

    def size(w: Workload) -> int:
        env = d.resolve_axes(w.axes)
        return sum(
            nbytes(spec.dtype, spec.concrete_shape(env))
            for name, spec in d.inputs.items()
            if not spec.is_scalar and (w.inputs.get(name) is None or w.inputs[name].type != "scalar")
        )

    if not problem.workloads:
        raise ValueError(f"{problem.path}: workload.jsonl holds no workloads")
    return min(problem.workloads, key=size)


@contextlib.contextmanager
def loaded_entry(solution: Solution, directory: Path) -> Iterator[Callable[..., Any]]:
    """The candidate's entry function, its files written under ``directory`` and that directory on the import
    path, last, as the judge's worker puts it: a candidate of several modules (the subgraph candidate ships a
    package beside its entry) imports its own files here as it does there. The path is restored on exit."""
    for src in solution.sources:
        path = directory / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.content)
    sys.path.append(str(directory))
    try:
        spec = importlib.util.spec_from_file_location("solforge_precheck_entry", directory / solution.spec.entry_file)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        yield getattr(module, solution.spec.entry_function)
    finally:
        while str(directory) in sys.path:
            sys.path.remove(str(directory))


def _clone(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _tensors(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def check_here(problem: Problem, solution: Solution, device: str, workload: Workload | None = None) -> Outcome:
    """Run ``solution`` in this process on ``device`` and compare it with the eager reference."""
    t0 = time.monotonic()
    w = workload or smallest_workload(problem)
    with tempfile.TemporaryDirectory(prefix="solforge-precheck-") as tmp:
        why = _first_miss(problem, solution, device, w, Path(tmp))
    return Outcome(why is None, why or "", time.monotonic() - t0)


def _first_miss(problem: Problem, solution: Solution, device: str, w: Workload, tmp: Path) -> str | None:
    """Why ``solution`` (its files written under ``tmp``) fails on workload ``w``, or None when it passes."""
    d = problem.definition
    where = f"workload {w.uuid}"
    ref = load_reference(d)
    with contextlib.ExitStack() as stack:
        try:
            fn = stack.enter_context(loaded_entry(solution, tmp))
        except Exception as e:
            return f"{where}: the candidate failed to load: {type(e).__name__}: {str(e)[:300]}"
        for seed in _SEEDS:
            inputs = list(make_inputs(d, w, device, seed=seed, reference=ref).values())
            with torch.no_grad():
                wants = _tensors(ref.run(*_clone(inputs)))
            try:
                with torch.no_grad():
                    if solution.spec.destination_passing_style:
                        got = [torch.empty(s, dtype=t, device=device) for s, t in output_specs(d, w).values()]
                        for o in got:
                            if o.is_floating_point():
                                o.fill_(float("nan"))
                        fn(*_clone(inputs), *got)
                    else:
                        got = list(_tensors(fn(*_clone(inputs))))
            except Exception as e:
                return f"{where}: the candidate raised {type(e).__name__}: {str(e)[:300]}"
            if len(got) != len(wants):
                return f"{where}: {len(got)} outputs, the eager reference returns {len(wants)}"
            for name, g, e in zip(d.outputs, got, wants):
                if not isinstance(e, torch.Tensor):
                    e = torch.tensor(e, device=device)
                try:
                    compare(name, g, e, w.tolerance)
                except Exception as err:
                    return f"{where}: misses the eager reference's tolerance: {err}"
    return None


def check(problem: Problem, solution: Solution, device: str, timeout_s: float) -> Outcome:
    """``check_here`` in a child process, killed with its process group after ``timeout_s``."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="solforge-precheck-req-") as tmp:
        sol_path = Path(tmp) / "solution.json"
        sol_path.write_text(solution.model_dump_json())
        uuid = smallest_workload(problem).uuid
        argv = [sys.executable, "-m", "agents.offline.precheck", str(problem.path), str(sol_path), device, uuid]
        # the judge's worker runs candidates with the problem's default precision flags and a fresh process;
        # so does this one, from the repository root (where ``agents`` imports)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")]))}
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome(False, f"the check took over {timeout_s:.0f} s (compile and run, smallest workload)",
                           time.monotonic() - t0)  # fmt: skip
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        why = f"the check's process exited {proc.returncode}: {err.strip()[-400:]}"
        return Outcome(False, why, time.monotonic() - t0)
    got = json.loads(lines[-1])
    return Outcome(bool(got["ok"]), str(got["reason"]), time.monotonic() - t0)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Check a candidate against the eager reference on the problem's smallest workload; prints one "
        "JSON line {ok, reason, seconds}.",
        epilog="example: python -m agents.offline.precheck tests/fixtures/problems/rmsnorm_small sol.json cpu",
    )
    p.add_argument("problem", type=Path)
    p.add_argument("solution", type=Path)
    p.add_argument("device")
    p.add_argument("workload", nargs="?", help="the workload's uuid (default: the smallest)")
    a = p.parse_args(argv)
    problem = load_problem(a.problem)
    workload = next((w for w in problem.workloads if w.uuid == a.workload), None)
    if a.workload and workload is None:
        p.error(f"{a.problem}/workload.jsonl: no workload with uuid {a.workload!r}")
    solution = Solution.model_validate_json(a.solution.read_text())
    print(json.dumps(asdict(check_here(problem, solution, a.device, workload))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
