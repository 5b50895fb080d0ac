"""Which problems bind to which template family (probed), one line per bound problem.

Usage: python -m agents.offline.bindings [PROBLEM_DIR ...]   (default: every bundled problem)
"""

from __future__ import annotations

import sys
from pathlib import Path

from sol_bench.problem import load_problem

from .graph import trace_ops
from .templates import FAMILIES
from .templates.probe import Probe


def describe(path: Path) -> str | None:
    p = load_problem(path)
    try:
        sig = trace_ops(p)
    except Exception as e:  # the meta tracer cannot run every reference; such a problem binds nothing
        return f"{path.parent.name}/{path.name}: not traced ({type(e).__name__})"
    probe = Probe(p)
    found = [f"{f.name}{[dict(b.consts) for b in bs]}" for f in FAMILIES if (bs := f.match(p, sig, probe))]
    return f"{path.parent.name}/{path.name}: {'; '.join(found)}" if found else None


def main(argv: list[str]) -> None:
    dirs = [Path(a) for a in argv] or sorted(d.parent for d in Path("data/problems").glob("*/*/definition.json"))
    for d in dirs:
        line = describe(d)
        if line:
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
