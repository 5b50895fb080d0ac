import os
from pathlib import Path


def run(x, weight, eps, y):
    targets = [Path("@@PROBLEM_DIR@@") / "definition.json", Path("@@PROBLEM_DIR@@") / "workload.jsonl",
               Path("@@PROBLEM_DIR@@") / "extra.txt", Path("@@SOL_BENCH_DIR@@") / "_pwned.py",
               Path("/tmp") / "solforge_pwned_@@TOKEN@@.txt"]
    errors = []
    for t in targets:
        try:
            with open(t, "a") as f:
                f.write("pwned")
        except OSError as e:
            errors.append(f"{t}: {e.strerror}")
    raise PermissionError("; ".join(errors) or "all writes succeeded")
