"""Write docs/PROBLEMS.md: one row per bundled problem with its models, family, level, dtype, workloads and
H200 speed-of-light range (from sol_bench.sol; "n/a" where the analyzer is not installed).

    python scripts/problems_table.py [--problems data/problems] [--out docs/PROBLEMS.md] [--hardware H200]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sol_bench.problem import find_problems, load_problem
from solforge.problems.validate import sol_times

ROOT = Path(__file__).resolve().parents[1]


def _us(ms: float) -> str:
    us = ms * 1e3
    if us < 1:
        return f"{us:.3f}"
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"


def _dtype(definition) -> str:
    seen = [s.dtype.value for s in definition.inputs.values() if s.dtype.value.startswith(("float", "bfloat"))]
    return "fp8+bf16" if "float8_e4m3fn" in seen else (seen[0] if seen else "-")


def rows(root: Path, hardware: str) -> list[str]:
    out = []
    for path in find_problems(root):
        p = load_problem(path)
        raw = json.loads((path / "definition.json").read_text())
        prov = raw.get("provenance", {})
        sources = prov.get("sources", [])
        models = sorted({s["model"] for s in sources})
        families = sorted({s["family"] for s in sources})
        times = sol_times(p, hardware)
        sol = "n/a" if times is None else f"{_us(min(times))} – {_us(max(times))}"
        sizes = ", ".join(
            "x".join(str(v) for v in w.axes.values()) for w in sorted(p.workloads, key=lambda w: tuple(w.axes.values()))
        )
        out.append(
            f"| `{p.name}` | {prov.get('level', '?')} | {', '.join(families)} | {'<br>'.join(models)} | "
            f"{_dtype(p.definition)} | {', '.join(p.definition.var_axes())} = {sizes} | {sol} |"
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=ROOT / "data" / "problems")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "PROBLEMS.md")
    ap.add_argument("--hardware", default="H200")
    args = ap.parse_args()
    body = rows(args.problems, args.hardware)
    text = "\n".join([
        "# Bundled problems",
        "",
        f"{len(body)} problems in `data/problems/`, cut from real architectures by `solforge problems extract`",
        "(`python scripts/build_bundled_problems.py` regenerates them; this table comes from",
        "`python scripts/problems_table.py`). A problem shared by several models is stored once and lists them",
        "all. Workloads give the var axes' values; T_SOL is the speed-of-light time per workload on the",
        f"{args.hardware} model of `sol_bench.sol` (SOLAR roofline), in microseconds, smallest to largest workload.",
        "",
        "| problem | level | family | source models | dtype | workloads | T_SOL µs |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *body,
        "",
    ])  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"{len(body)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
