"""A solution as a directory: ``solution.json`` (sources inline, the format the judge reads) and each source
file written out beside it, so a reader sees the code without parsing JSON."""

from __future__ import annotations

import re
from pathlib import Path

from sol_bench.models import Solution

SOLUTION_FILE = "solution.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_name(name: str) -> str:
    """A file-system name for a problem or run name (they are free text in the tables)."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


def write_solution_dir(solution: Solution, dest: Path) -> Path:
    """Write ``dest/solution.json`` and ``dest/<each source path>``; returns the solution.json path."""
    dest.mkdir(parents=True, exist_ok=True)
    for s in solution.sources:
        if s.path == SOLUTION_FILE:
            raise ValueError(f"solution {solution.name!r}: a source named {SOLUTION_FILE} would be overwritten")
        f = dest / s.path  # paths are relative without '..' (checked by the Solution model)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(s.content)
    out = dest / SOLUTION_FILE
    out.write_text(solution.model_dump_json(indent=1) + "\n")
    return out
