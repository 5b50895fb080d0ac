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


# Device code built by the host compiler, for the emulation tests: CUDA's qualifiers as nothing, the thread
# coordinates as globals the caller sets before each "thread" runs, 16-byte vectors as a plain struct, bf16 as
# its bits (round to nearest even).
HOST_SHIMS = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __launch_bounds__(n)
struct uint4 { uint32_t x, y, z, w; };
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }
struct Dim3 { long long x, y; };
static Dim3 threadIdx{0, 0}, blockIdx{0, 0}, blockDim{1, 1}, gridDim{1, 1};
struct bf16 { uint16_t bits; };
template <typename T> float to_f(T v);
template <> float to_f<bf16>(bf16 v) { uint32_t u = uint32_t(v.bits) << 16; float f; std::memcpy(&f, &u, 4); return f; }
template <typename T> T from_f(float v);
template <> bf16 from_f<bf16>(float v) {
  uint32_t u; std::memcpy(&u, &v, 4); u += 0x7fffu + ((u >> 16) & 1u); return bf16{uint16_t(u >> 16)};
}
"""


def host_library(source: str, root: Path, name: str, flags: tuple[str, ...] = ("-O1",)):
    """``source`` compiled by the host C++ compiler into ``root/name.so`` and loaded (ctypes); skips the test
    where there is no compiler."""
    import ctypes
    import shutil

    import pytest

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src, so = root / f"{name}.cpp", root / f"{name}.so"
    src.write_text(source)
    subprocess.run([cxx, *flags, "-shared", "-fPIC", "-o", str(so), str(src)], check=True, capture_output=True,
                   text=True, timeout=120)  # fmt: skip
    return ctypes.CDLL(str(so))
