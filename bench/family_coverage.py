"""Where the subgraph families are found inside problems, and whether the rewritten graph still computes what
the reference does: CPU only, no GPU needed.

For every problem directory at or below the given paths: the regions ``agents/offline/subgraph`` replaces in its
reference (``solution.find``: traced at the smallest workload, each region checked on random CPU inputs against
the family's op; and what the capture replaced: stand-ins, expert loops), whether the family was found inside a
larger problem (the rewritten graph still holds other compute) or is the whole problem, and whether the rewritten
graph's outputs match the reference's on the CPU at the smallest workload: in float32 (half-precision inputs
widened) where the reference runs so, at a tight tolerance; else at the problem's dtypes and tolerance. Problems
whose inputs hold more than ``--max-elems`` elements are not run (the table says so). One Markdown table per
family, then the problems where nothing was found, by reason.

    .venv/bin/python bench/family_coverage.py data/problems /tmp/gen99 -o family_coverage.md
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from agents.offline.subgraph import solution as subgraph_solution  # noqa: E402
from agents.offline.subgraph.families import FAMILIES  # noqa: E402
from agents.offline.subgraph.loops import captured  # noqa: E402
from agents.offline.subgraph.rewrite import rewrite  # noqa: E402
from sol_bench.correctness import compare  # noqa: E402
from sol_bench.inputs import make_inputs  # noqa: E402
from sol_bench.models import Tolerance  # noqa: E402
from sol_bench.problem import Problem, find_problems, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402

_FP32_TOL = Tolerance(max_atol=1e-3, max_rtol=1e-3, required_matched_ratio=1.0)


@dataclass(frozen=True)
class Row:
    problem: str
    regions: Counter  # (family, op name) -> regions replaced: ("rmsnorm", "add_rmsnorm"), ...
    families: Counter  # family -> regions replaced
    inside: bool | None  # found inside a larger problem (None: nothing found)
    check: str  # the rewritten graph against the reference
    why: str  # why nothing was found ("" when something was)


def _smallest(problem: Problem) -> Any:
    return min(problem.workloads, key=problem.workload_bytes)


def _widened(args: list) -> list:
    half = (torch.float16, torch.bfloat16)
    return [a.float() if isinstance(a, torch.Tensor) and a.dtype in half else a for a in args]


def _outputs(x: Any) -> list[torch.Tensor]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _matches(run: Any, args: list, tol: Tolerance) -> tuple[bool, str]:
    want = _outputs(run(*args))
    gm, done = rewrite(captured(run, args), "cpu")
    got = _outputs(gm(*args))
    if len(got) != len(want):
        return False, f"{len(got)} outputs, the reference has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        try:
            compare(f"#{i}", g, w, tol)
        except Exception as e:  # noqa: BLE001 - any mismatch (shape, dtype, numbers) is the answer
            return False, f"{len(done)} regions; {type(e).__name__}: {' '.join(str(e).split())[:120]}"
    return True, f"{len(done)} regions"


def check(problem: Problem, max_elems: int, seed: int = 0) -> str:
    """The rewritten graph against the reference at the smallest workload, on the CPU: widened to float32
    (tight tolerance) where the reference runs so, and at the problem's own dtypes (its tolerance) where those
    differ, since that graph is the one a candidate runs."""
    ref = load_reference(problem.definition)
    w = _smallest(problem)
    shapes = make_inputs(problem.definition, w, "meta", seed=seed, reference=ref)
    elems = sum(v.numel() for v in shapes.values() if isinstance(v, torch.Tensor))
    if elems > max_elems:
        return f"not run ({elems / 1e6:.0f}M input elements)"
    args = list(make_inputs(problem.definition, w, "cpu", seed=seed, reference=ref).values())
    wide = _widened(args)
    widened = any(a is not b for a, b in zip(wide, args))
    runs = [("fp32", wide, _FP32_TOL)] + ([("native", args, w.tolerance)] if widened else [])
    verdicts = []
    for where, inputs, tol in runs:
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                ok, what = _matches(ref.run, inputs, tol)
        except Exception as e:  # noqa: BLE001 - a reference that does not run widened (fp16-only kernels)
            if where == "fp32":
                continue
            raise e
        verdicts.append((ok, f"{where}: {what}"))
    if not verdicts:
        return "not run (no dtype ran)"
    return f"{'match' if all(ok for ok, _ in verdicts) else 'MISMATCH'} ({'; '.join(v for _, v in verdicts)})"


def survey(path: Path, max_elems: int) -> Row:
    problem = load_problem(path)
    found = subgraph_solution.find(problem)
    regions = Counter((r.family, r.description.split("(")[0]) for r in found.replaced)
    families = Counter(r.family for r in found.replaced)
    if not found.replaced:
        return Row(problem.name, regions, families, None, "", found.why)
    try:
        verdict = check(problem, max_elems)
    except Exception as e:  # noqa: BLE001 - the table reports it
        verdict = f"ERROR ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
    return Row(problem.name, regions, families, found.inside_larger, verdict, "")


def render(rows: list[Row]) -> str:
    out = [f"# Subgraph families found in {len(rows)} problems\n"]
    named = [f.name for f in FAMILIES]
    # then what the capture itself replaced: stand-ins with no host sync, expert loops grouped
    for fam in named + sorted({f for r in rows for f in r.families} - set(named)):
        hits = [r for r in rows if r.families[fam]]
        inside = sum(1 for r in hits if r.inside)
        matched = sum(1 for r in hits if r.check.startswith("match"))
        out.append(f"## {fam}: found in {len(hits)} problems ({inside} inside a larger problem), "
                   f"{sum(r.families[fam] for r in hits)} regions; rewritten graph matched in {matched}\n")  # fmt: skip
        if not hits:
            continue
        out.append("| problem | regions replaced | inside a larger problem | rewritten graph vs reference (CPU) |")
        out.append("|---|---|---|---|")
        for r in hits:
            regions = ", ".join(f"{op} x{n}" for (f, op), n in sorted(r.regions.items()) if f == fam)
            larger = {True: "yes", False: "no (the whole problem)", None: "?"}[r.inside]
            out.append(f"| {r.problem} | {regions} | {larger} | {r.check} |")
        out.append("")
    missed = [r for r in rows if not r.families]
    out.append(f"## Nothing found: {len(missed)} problems\n")
    if missed:
        out.append("| reason | problems |")
        out.append("|---|---|")
        by_why: dict[str, list[str]] = defaultdict(list)
        for r in missed:
            by_why[" ".join(r.why.split(":")[0].split())].append(r.problem)
        for why, names in sorted(by_why.items(), key=lambda kv: -len(kv[1])):
            out.append(f"| {why} | {len(names)}: {', '.join(sorted(names))} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path, help="problem directories, or folders holding them")
    ap.add_argument("-o", "--out", type=Path, help="write the Markdown here (default: stdout)")
    ap.add_argument("--max-elems", type=int, default=1 << 26,
                    help="run the output check only below this many input elements")  # fmt: skip
    args = ap.parse_args(argv)
    # a reference that fake tensors cannot run is reported in the table; torch's own traceback adds nothing
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    dirs = [d for p in args.paths for d in find_problems(p)]
    if not dirs:
        raise SystemExit(f"no problem directories under {', '.join(map(str, args.paths))}")
    rows = []
    for d in dirs:
        rows.append(survey(d, args.max_elems))
        what = dict(rows[-1].families) or " ".join(rows[-1].why.split())[:160]
        print(f"{rows[-1].problem}: {what} {rows[-1].check}", file=sys.stderr)
    text = render(rows)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
