"""Build C++ candidates (torch extensions) in a sandboxed subprocess, cached by source hash.

``plan_build`` returns the argv to run; ``run_build`` executes it with a timeout. On a CUDA device the
extension is built and linked with ``torch.utils.cpp_extension`` for the device's architecture (sm_90a on
Hopper). Without a GPU, ``compile_only`` checks that every source compiles (nvcc for ``.cu``, for sm_90a by
default), which is what CI can verify.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import CandidateTimeout, CompileFailure
from .models import Solution
from .staging import Staged

ARTIFACT_NAME = "artifact.txt"  # the build writes the built module's path here when it succeeds
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".cu")


@dataclass(frozen=True)
class BuildPlan:
    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    artifact_file: Path
    log_file: Path


@dataclass(frozen=True)
class BuildResult:
    module_path: Path | None  # None for compile-only builds
    seconds: float
    cached: bool
    log: str


def arch_for(device: str) -> str:
    """The CUDA architecture to build for: the device's, with the 'a' suffix on Hopper (wgmma)."""
    if device.startswith("cuda"):
        import torch

        major, minor = torch.cuda.get_device_capability(torch.device(device))
        return f"sm_{major}{minor}a" if (major, minor) >= (9, 0) else f"sm_{major}{minor}"
    return "sm_90a"


def module_name(staged: Staged) -> str:
    return f"solforge_ext_{staged.key}"


def plan_build(solution: Solution, staged: Staged, device: str, env: dict[str, str]) -> BuildPlan:
    sources = [s.path for s in solution.sources if s.path.endswith(CPP_SUFFIXES)]
    if not sources:
        raise CompileFailure("a C++ solution needs at least one .cpp/.cc/.cu source")
    opts = solution.spec.compile_options
    mode = "load" if device.startswith("cuda") or not any(s.endswith(".cu") for s in sources) else "compile_only"
    argv = [
        sys.executable, "-P", "-B", "-m", "sol_bench.build_worker",
        "--staging", str(staged.root), "--name", module_name(staged), "--mode", mode,
        "--arch", arch_for(device), "--with-cuda", "1" if any(s.endswith(".cu") for s in sources) else "0",
    ]  # fmt: skip
    for s in sources:
        argv += ["--source", s]
    for flag, values in (("--cflag", opts.cflags), ("--cuda-cflag", opts.cuda_cflags), ("--ldflag", opts.ld_flags)):
        for v in values:
            argv += [flag + "=" + v]
    return BuildPlan(
        argv=tuple(argv),
        cwd=staged.run,
        env=env,
        artifact_file=staged.build / ARTIFACT_NAME,
        log_file=staged.build / "build.log",
    )


def run_build(plan: BuildPlan, timeout_s: float) -> BuildResult:
    if plan.artifact_file.is_file():
        text = plan.artifact_file.read_text().strip()
        return BuildResult(Path(text) if text else None, 0.0, True, "")
    t0 = time.monotonic()
    with open(plan.log_file, "w") as log:
        proc = subprocess.Popen(
            plan.argv, cwd=plan.cwd, env=plan.env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            from .sandbox import kill_tree

            kill_tree(proc.pid)
            proc.wait()
            raise CandidateTimeout(f"build exceeded {timeout_s:.0f} s") from None
    text = plan.log_file.read_text(errors="replace")
    if rc != 0 or not plan.artifact_file.is_file():
        raise CompileFailure(trim_log(text))
    artifact = plan.artifact_file.read_text().strip()
    return BuildResult(Path(artifact) if artifact else None, time.monotonic() - t0, False, text)


def trim_log(text: str, limit: int = 6000) -> str:
    """Keep the compiler's errors: lines with 'error' first, then the tail."""
    lines = text.splitlines()
    errors = [l for l in lines if "error" in l.lower()][:40]
    tail = "\n".join(lines[-60:])
    out = ("\n".join(errors) + "\n...\n" + tail) if errors else tail
    return out[-limit:]

