"""Stage a candidate's sources in a private directory under ``kernels_tmp/``.

Layout of one staged candidate (keyed by a hash of its sources and spec, so builds are cached)::

    <staging_root>/<key>/src/     the solution's files, read by the candidate
    <staging_root>/<key>/build/   compiler output (C++ languages)
    <staging_root>/<key>/run/     scratch: the candidate's working directory, caches, TMPDIR

Sources are written to a temporary directory and renamed into place, so a crash leaves nothing half
written. A Python source whose top-level module name would shadow an installed or standard module is
refused before anything runs: the candidate's directory goes last on ``sys.path`` anyway.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import RewardHack
from .models import Solution

_FORBIDDEN_MODULES = {"sitecustomize", "usercustomize", "sol_bench", "solforge", "torch", "triton", "cutlass"}


@dataclass(frozen=True)
class Staged:
    key: str
    root: Path
    src: Path
    build: Path
    run: Path


def solution_key(solution: Solution) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(solution.spec.model_dump(mode="json"), sort_keys=True).encode())
    for s in sorted(solution.sources, key=lambda s: s.path):
        h.update(b"\0" + s.path.encode() + b"\0" + s.content.encode())
    return h.hexdigest()[:24]


def top_level_modules(solution: Solution) -> set[str]:
    out = set()
    for s in solution.sources:
        first = s.path.replace("\\", "/").split("/")[0]
        if "/" in s.path:
            out.add(first)
        elif first.endswith(".py"):
            out.add(first[:-3])
    return out


def check_shadowing(solution: Solution) -> None:
    for name in sorted(top_level_modules(solution)):
        if name in _FORBIDDEN_MODULES or name in sys.stdlib_module_names or name in sys.builtin_module_names:
            raise RewardHack(f"source {name!r} would shadow a standard or judge module")
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            raise RewardHack(f"source {name!r} would shadow the installed module at {spec.origin}")


def stage(solution: Solution, staging_root: Path) -> Staged:
    key = solution_key(solution)
    staging_root = Path(staging_root).resolve()
    root = staging_root / key
    src = root / "src"
    if not src.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".src-", dir=root))
        for s in solution.sources:
            p = (tmp / s.path).resolve()
            if tmp.resolve() not in p.parents:
                raise RewardHack(f"source path {s.path!r} escapes the staging directory")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(s.content)
        try:
            os.rename(tmp, src)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another judge staged the same key first
    for d in ("build", "run"):
        (root / d).mkdir(exist_ok=True)
    return Staged(key=key, root=root, src=src, build=root / "build", run=root / "run")
