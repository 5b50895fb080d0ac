"""Regenerate the bundled problem set in data/problems from solforge.problems.bundle (deterministic).

    python scripts/build_bundled_problems.py            # rewrite data/problems
    python scripts/build_bundled_problems.py --validate # and check every problem (CPU reference + SOL)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from solforge.problems.bundle import build_bundle
from solforge.problems.validate import validate_problem

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "problems")
    ap.add_argument("--validate", action="store_true", help="run each reference on the CPU and the SOL analysis")
    args = ap.parse_args()
    paths = build_bundle(args.out)
    print(f"{len(paths)} problems in {args.out}")
    if not args.validate:
        return 0
    failed = 0
    for p in paths:
        start = time.perf_counter()
        try:
            v = validate_problem(p)
        except Exception as e:  # noqa: BLE001 - report every failing problem, then fail the run
            failed += 1
            print(f"FAIL {p.name}: {type(e).__name__}: {e}")
            continue
        sol = "n/a" if v.t_sol_ms is None else f"{min(v.t_sol_ms) * 1e3:.2f}-{max(v.t_sol_ms) * 1e3:.1f} us"
        print(f"ok   {v.name:72s} ref {v.cpu_seconds:6.2f}s  check {time.perf_counter() - start:5.1f}s  T_SOL {sol}")
    print(f"{len(paths) - failed} valid, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
