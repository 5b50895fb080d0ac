"""`bench/cuda_gemv_bench.py`, not a tool: the benches import it (``from cuda_gemv_bench import cuda_gemvs``, as
``bench/gemm_vs_cublas.py`` does). The CUDA C++ GEMV template (``agents/offline/templates/gemv_cuda.py``) as plain
calls ``y = a @ w.t()``: its kernels read M, N and K at run time, so one decode-shaped linear problem, written here,
renders them all, and each of the template's variants is built once (the judge's build, ``sol_bench.build``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import torch

from agents.offline.graph import trace_ops
from agents.offline.templates import FAMILIES, build_solution
from agents.offline.templates.probe import Probe
from sol_bench.build import plan_build, run_build
from sol_bench.models import Solution
from sol_bench.problem import load_problem
from sol_bench.runner import candidate_env
from sol_bench.staging import stage

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
    """Variant name -> the rendered solution, one per distinct source the CUDA GEMV renderer makes."""
    problem = load_problem(linear_problem(root))
    sig, probe = trace_ops(problem), Probe(problem)
    out: dict[str, Solution] = {}
    for fam in FAMILIES:
        for binding in fam.match(problem, sig, probe):
            for r in fam.renderers:
                if r.language != LANGUAGE or not r.accepts(binding):
                    continue
                seen: set = set()
                for params in r.variants():
                    sol = build_solution(problem, fam.name, r, binding, params)
                    key = tuple((s.path, s.content) for s in sol.sources)
                    if key not in seen:
                        seen.add(key)
                        out["cuda gemv " + " ".join(f"{k}{v}" for k, v in sorted(params.items()))] = sol
    return out


def _load(path: Path):
    name = path.name.split(".")[0]
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def cuda_gemvs(device: str, staging: Path, jobs: int = 4, timeout_s: float = 600.0,
               log: Callable[[str], None] = print) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """Name -> ``gemv(a, w)`` for a [M, K] and a weight w [N, K] (M up to the template's SMALL_M), each variant
    built for ``device``; a variant that does not build is logged and left out."""
    root = Path(tempfile.mkdtemp(prefix="gemv-bench-", dir=staging))
    sols = gemv_solutions(root)

    def build(item):
        name, sol = item
        staged = stage(sol, staging)
        try:
            return name, run_build(plan_build(sol, staged, device, candidate_env(staged, device)), timeout_s).module_path
        except Exception as e:  # noqa: BLE001 - one variant that does not build leaves the others
            last = str(e).strip().splitlines()[-1:] or [""]
            log(f"{name}: not built: {type(e).__name__}: {last[0][:200]}")
            return name, None

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        built = [(n, p) for n, p in pool.map(build, sols.items()) if p is not None]
    out = {}
    for name, path in built:
        module = _load(path)

        def call(a, w, module=module):
            y = torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype)
            module.run(a, w, y)
            return y

        out[name] = call
    return out
