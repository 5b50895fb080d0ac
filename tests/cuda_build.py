"""Compile a CUDA template's two translation units with torch.utils.cpp_extension's flags, without linking.

``kernel.cu`` goes through nvcc for sm_90a and ``binding.cpp`` through the host compiler, in parallel as the
judge's ninja builds them. A CPU build of torch lacks the generated ``c10/cuda/impl/cuda_cmake_macros.h``
(its only content, ``C10_CUDA_BUILD_SHARED_LIBS``, matters on Windows), so it is skipped there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sol_bench.models import Solution

GENCODE = "-gencode=arch=compute_90a,code=sm_90a"
# What the kernel TU may include: at::Tensor, the current CUDA stream, TORCH_CHECK and the launch check.
LIGHT_HEADERS = {
    "ATen/core/Tensor.h", "c10/cuda/CUDAException.h", "c10/cuda/CUDAStream.h", "c10/util/Exception.h",
    "cuda_bf16.h", "cuda_fp16.h",
}  # fmt: skip


def includes(source: str) -> set[str]:
    return set(re.findall(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", source, re.M))


def _flags(name: str) -> tuple[list[str], list[str]]:
    from torch.utils import cpp_extension

    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    inc = [*cpp_extension.include_paths(), str(Path(nvcc).resolve().parent.parent / "include")]
    inc.append(sysconfig.get_path("include", scheme="posix_prefix"))
    common = [f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    common += [a for i in inc for a in ("-isystem", i)]
    if not (Path(cpp_extension.include_paths()[0]) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").is_file():
        common.append("-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE")
    nvcc_flags = [*common, *cpp_extension.COMMON_NVCC_FLAGS, "--compiler-options", "-fPIC", "-O3", GENCODE,
                  "-std=c++17"]  # fmt: skip
    cxx_flags = [*common, "-fPIC", "-std=c++17", "-O3"]
    return nvcc_flags, cxx_flags


def compile_objects(solution: Solution, out: Path, timeout_s: float = 240) -> dict[str, Path]:
    """Every .cu/.cpp source of ``solution`` compiled to an object under ``out`` (path -> object)."""
    nvcc_flags, cxx_flags = _flags("solforge_ext_test")
    cmds: dict[str, list[str]] = {}
    for s in solution.sources:
        src = out / s.path
        src.write_text(s.content)
        if s.path.endswith(".cu"):
            cmds[s.path] = ["nvcc", "-c", str(src), "-o", f"{src}.o", *nvcc_flags]
        elif s.path.endswith(".cpp"):
            cmds[s.path] = ["c++", "-c", str(src), "-o", f"{src}.o", *cxx_flags]

    def build(cmd: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)

    with ThreadPoolExecutor(len(cmds)) as pool:
        done = dict(zip(cmds, pool.map(build, cmds.values())))
    for path, r in done.items():
        assert r.returncode == 0, f"{path}:\n{r.stderr[-3000:]}"
    return {path: out / f"{path}.o" for path in cmds}


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
