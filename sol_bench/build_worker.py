"""Entry of the build subprocess: sandbox first, then compile. Not for direct use."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import sandbox


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sol_bench.build_worker")
    p.add_argument("--staging", required=True, type=Path)
    p.add_argument("--name", required=True)
    p.add_argument("--mode", choices=("load", "compile_only"), required=True)
    p.add_argument("--arch", required=True)
    p.add_argument("--with-cuda", choices=("0", "1"), required=True)
    p.add_argument("--source", action="append", default=[])
    p.add_argument("--cflag", action="append", default=[])
    p.add_argument("--cuda-cflag", action="append", default=[])
    p.add_argument("--ldflag", action="append", default=[])
    return p.parse_args()


def _gencode(arch: str) -> str:
    num = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{num},code=sm_{num}"


def _cuda_includes() -> list[str]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    for r in roots:
        if r and (Path(r) / "include" / "cuda_runtime_api.h").is_file():
            return [str(Path(r) / "include")]
    return []


def compile_only(args: argparse.Namespace, src: Path, build: Path) -> None:
    from torch.utils import cpp_extension

    import sysconfig

    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    if args.with_cuda == "1":
        # Host sources of a CUDA extension include CUDA headers too (ATen/cuda/CUDAContext.h), and a CPU
        # build of torch knows no CUDA_HOME.
        includes += _cuda_includes()
    inc = [f"-I{i}" for i in includes]
    defs = [f"-DTORCH_EXTENSION_NAME={args.name}", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1"]
    if not (Path(cpp_extension.include_paths()[0]) / "c10/cuda/impl/cuda_cmake_macros.h").is_file():
        # A CPU build of torch ships c10/cuda headers without this generated one (it only matters on Windows).
        defs.append("-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE")
    procs = []
    for s in args.source:  # every translation unit at once, as ninja would build them
        out = build / (Path(s).name + ".o")
        if s.endswith(".cu"):
            # torch's own nvcc flags (no implicit half/bf16 conversions, relaxed constexpr), as a GPU build has
            cmd = ["nvcc", "-c", str(src / s), "-o", str(out), "-std=c++17", _gencode(args.arch), "-O3",
                   *cpp_extension.COMMON_NVCC_FLAGS, "-Xcompiler", "-fPIC", *defs, *inc, *args.cuda_cflag]  # fmt: skip
        else:
            cmd = ["c++", "-c", str(src / s), "-o", str(out), "-std=c++17", "-O3", "-fPIC", *defs, *inc, *args.cflag]
        print("+", " ".join(cmd[:4]), "...", flush=True)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    failed = False
    for p in procs:
        output, _ = p.communicate()
        sys.stdout.write(output.decode(errors="replace"))
        failed |= p.returncode != 0
    sys.stdout.flush()
    if failed:
        sys.exit(1)


def torch_arch_list(arch: str) -> str:
    """'sm_90a' -> '9.0a', 'sm_80' -> '8.0' (torch.utils.cpp_extension's spelling)."""
    num = arch.removeprefix("sm_")
    suffix = "a" if num.endswith("a") else ""
    digits = num.removesuffix("a")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


# Builds run below normal priority: on a GPU machine they share the CPU with candidates being timed, whose
# host-launched windows a busy CPU inflates (a session-4 run on an H200 with builds and compiles alongside
# reported launch-bound kernels 2-5x slower than the same kernels timed alone).
BUILD_NICENESS = 10


def main() -> None:
    args = _parse()
    print("niceness:", os.nice(BUILD_NICENESS), flush=True)  # nvcc, ninja and the compilers inherit it
    root = args.staging.resolve()
    src, build, run = root / "src", root / "build", root / "run"
    tmp = run / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)
    print("sandbox:", sandbox.apply(sandbox.SandboxPolicy(writable=(build, run))), flush=True)
    if args.mode == "compile_only":
        compile_only(args, src, build)
        (build / "artifact.txt").write_text("")
        return
    os.environ["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(args.arch)
    from torch.utils import cpp_extension

    module = cpp_extension.load(
        name=args.name,
        sources=[str(src / s) for s in args.source],
        extra_cflags=["-O3", *args.cflag],
        extra_cuda_cflags=["-O3", _gencode(args.arch), *args.cuda_cflag] if args.with_cuda == "1" else None,
        extra_ldflags=args.ldflag,
        build_directory=str(build),
        with_cuda=args.with_cuda == "1",
        verbose=True,
    )
    (build / "artifact.txt").write_text(str(module.__file__))


if __name__ == "__main__":
    main()
