"""`bench/cuda_gemv_bench.py`, not a tool: the benches import it (``from cuda_gemv_bench import cuda_gemvs``, as
``bench/gemm_vs_cublas.py`` does). The CUDA C++ GEMV template (``agents/offline/templates/gemv_cuda.py``) as plain
calls ``y = a @ w.t()``: its kernels read M, N and K at run time, so one decode-shaped linear problem, written here,
renders them all, and each of the template's variants is built once (the judge's build, ``sol_bench.build``).
"""

from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import torch

from agents.offline.agent import plan
from launch_profile import build_cpp, load_module
from sol_bench.models import Solution
from sol_bench.problem import load_problem

LANGUAGE = "cuda_cpp"
_DEFINITION = {
    "name": "gemv_bench_linear",
    "axes": {"T": {"type": "var"}, "N": {"type": "const", "value": 256}, "K": {"type": "const", "value": 512}},
    "inputs": {"x": {"shape": ["T", "K"], "dtype": "bfloat16"}, "weight": {"shape": ["N", "K"], "dtype": "bfloat16"}},
    "outputs": {"y": {"shape": ["T", "N"], "dtype": "bfloat16"}},
    "reference": "import torch\n\n\ndef run(x, weight):\n    return x @ weight.t()\n",
}  # fmt: skip


def linear_problem(root: Path) -> Path:
    """A decode-shaped linear (one token, N 256, K 512): what the GEMM family binds the CUDA GEMV to."""
    d = root / _DEFINITION["name"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "definition.json").write_text(json.dumps(_DEFINITION))
    workload = {"uuid": "T1", "axes": {"T": 1}, "tolerance": {"max_atol": 2e-2, "max_rtol": 2e-2}}
    (d / "workload.jsonl").write_text(json.dumps(workload) + "\n")
    return d


def gemv_solutions(root: Path) -> dict[str, Solution]:
    """Variant name -> solution: what the offline agent plans in CUDA C++ for that linear (the GEMV's variants)."""
    problem = load_problem(linear_problem(root))
    return {"cuda gemv " + " ".join(f"{k}{v}" for k, v in sorted(p.params.items())): p.solution
            for p in plan(problem, "cuda:0", LANGUAGE) if p.group.startswith("gemm/")}  # fmt: skip


def cuda_gemvs(device: str, staging: Path, jobs: int = 4,
               log: Callable[[str], None] = print) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """Name -> ``gemv(a, w)`` for a [M, K] and a weight w [N, K] (M up to the template's SMALL_M), each variant
    built for ``device`` (``jobs`` at once, by ``bench/launch_profile.py``'s build and loader); a variant that does
    not build is logged and left out."""
    sols = gemv_solutions(Path(tempfile.mkdtemp(prefix="gemv-bench-", dir=staging)))

    def build(item):
        name, sol = item
        try:
            build_cpp(sol, device, staging)
            return name
        except Exception as e:  # noqa: BLE001 - one variant that does not build leaves the others
            last = str(e).strip().splitlines()[-1:] or [""]
            log(f"{name}: not built: {type(e).__name__}: {last[0][:200]}")
            return None

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        built = [name for name in pool.map(build, sols.items()) if name is not None]
    out = {}
    for name in built:
        module = load_module(sols[name], device, staging)  # built above: found in its staging directory

        def call(a, w, module=module):
            y = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
            module.run(a, w, y)
            return y

        out[name] = call
    return out
