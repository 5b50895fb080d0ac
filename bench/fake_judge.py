"""`bench/fake_judge.py`: a stand-in for ``python -m sol_bench eval`` that judges nothing, so a campaign's
measured time is its own. A helper, not a tool: ``bench_orchestration.py`` and ``bench_scheduling.py`` (and
``tests/test_scheduling.py``) install it as ``$SOLFORGE_JUDGE_PYTHON`` with ``install``.

It answers PASSED for the problem's workloads (or only the first) after holding its device slot ``--hold-s``
seconds; each attempt (the number that ends the solution's name) is a little faster than the one before, so
the planner never sees a plateau.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path


def install(path: Path, *, hold_s: float = 0.0, first_only: bool = False, hardware: str = "null") -> Path:
    """Write an executable at ``path`` that the campaign can call as its judge's interpreter."""
    own = ["--hold-s", str(hold_s), "--hardware", hardware] + (["--first-only"] if first_only else [])
    argv = " ".join(shlex.quote(a) for a in [sys.executable, str(Path(__file__).resolve()), *own, "--"])
    path.write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
    path.chmod(0o755)
    return path


def main(argv: list[str]) -> int:
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hold-s", type=float, default=0.0)
    ap.add_argument("--hardware", default="null")
    ap.add_argument("--first-only", action="store_true")
    own = ap.parse_args(argv[:split])
    judge = argv[split + 1:]  # -m sol_bench eval PROBLEM --solution FILE ...
    problem = Path(judge[3])
    name = json.loads((problem / "definition.json").read_text())["name"]
    sol = json.loads(Path(judge[judge.index("--solution") + 1]).read_text())["name"]
    k = int(sol.rsplit("_", 1)[-1]) if sol.rsplit("_", 1)[-1].isdigit() else 0
    time.sleep(own.hold_s)
    latency = 1.0 / (1 + k)
    lines = [line for line in (problem / "workload.jsonl").read_text().splitlines() if line.strip()]
    for line in lines[:1] if own.first_only else lines:
        ev = {"status": "PASSED", "environment": {"hardware": own.hardware},
              "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
              "performance": {"latency_ms": latency, "reference_latency_ms": 2.0, "speedup_factor": 2.0 / latency},
              "t_sol_ms": 0.01}  # fmt: skip
        print(json.dumps({"definition": name, "solution": sol, "workload": json.loads(line), "evaluation": ev}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
