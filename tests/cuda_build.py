"""Compile a candidate's C++/CUDA translation units through the judge's compile-only build (no GPU, no
link): ``kernel.cu`` with nvcc for sm_90a and ``binding.cpp`` with the host compiler, in parallel, with
torch's flags; then read the ``run`` symbols the objects define and need.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sol_bench.models import Solution

# What the kernel TU may include: at::Tensor, the current CUDA stream, TORCH_CHECK and the launch check, and
# small C++ standard headers (none of torch's extension headers, which cost nvcc most of a build).
LIGHT_HEADERS = {
    "ATen/core/Tensor.h", "c10/cuda/CUDAException.h", "c10/cuda/CUDAStream.h", "c10/util/Exception.h",
    "cuda_bf16.h", "cuda_fp16.h", "array", "mutex",
}  # fmt: skip


def includes(source: str) -> set[str]:
    return set(re.findall(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", source, re.M))


def compile_objects(solution: Solution, out: Path, timeout_s: float = 240) -> dict[str, Path]:
    """Every .cu/.cpp source of ``solution`` compiled to an object by the judge's compile-only build,
    staged under ``out`` (source path -> object)."""
    from sol_bench.build import CPP_SUFFIXES, plan_build, run_build
    from sol_bench.runner import candidate_env
    from sol_bench.staging import stage

    staged = stage(solution, out)
    run_build(plan_build(solution, staged, "cpu", candidate_env(staged, "cpu")), timeout_s)
    paths = [s.path for s in solution.sources if s.path.endswith(CPP_SUFFIXES)]
    objs = {p: staged.build / (Path(p).name + ".o") for p in paths}
    missing = [p for p, o in objs.items() if not o.is_file()]
    assert not missing, f"no object for {missing}"
    return objs


def run_symbols(obj: Path) -> dict[str, set[str]]:
    """The mangled ``run`` symbols of an object file by nm type: {'T': defined, 'U': undefined}."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    found: dict[str, set[str]] = {"T": set(), "U": set()}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-1].startswith("_Z3run") and parts[-2] in found:
            found[parts[-2]].add(parts[-1])
    return found


def demangle(symbol: str) -> str:
    return subprocess.run(["c++filt", symbol], capture_output=True, text=True, check=True).stdout.strip()
