"""Which of exported Inductor code, torch.compile and eager agree, per problem, variant and workload.

For each problem dir: export every variant of ``agents.offline.export`` (as the offline agent does), then on
every workload's inputs (the judge's contiguous buffers, a few seeds) run the eager reference, torch.compile of
the reference (the variant's mode and options) and the exported candidate (its own files, loaded as the judge
stages them), and compare each pair with the judge's comparison and the workload's tolerance. ``--child``
also runs the exported candidate in a fresh process per workload (``agents.offline.precheck``: torch's default
flags, no state of this process), which is where the judge's worker runs it. Prints one row per
(problem, variant, workload): ok or the first error of exported~eager, compiled~eager, exported~compiled.

Run on a GPU machine:
    .venv/bin/python bench/export_agreement.py data/problems/L2/attention_block_h4096_q32_kv8_d128_theta500000_bf16 \
        [more problem dirs] --device cuda:0 --seeds 3 --child --json export_agreement.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.offline import export, precheck  # noqa: E402
from sol_bench.correctness import compare  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.problem import load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402


def _agree(name_outs, got, want, tol) -> str:
    try:
        for name, g, w in zip(name_outs, got, want):
            compare(name, g, w.to(g.device), tol)
    except Exception as e:
        return f"NO: {str(e).splitlines()[0][:160]}"
    return "ok"


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _call(fn, problem, w, args, dps: bool, device: str) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        if not dps:
            return _outputs(fn(*export._clone(args)))
        outs = []
        for shape, dtype in output_specs(problem.definition, w).values():
            fill = float("nan") if dtype.is_floating_point else 0
            outs.append(torch.full(shape, fill, dtype=dtype, device=device))
        fn(*export._clone(args), *outs)
        return tuple(outs)


def check_problem(path: Path, device: str, seeds: int, child: bool) -> list[dict[str, Any]]:
    problem = load_problem(path)
    d = problem.definition
    names = list(d.outputs)
    rows = []
    for variant in export.VARIANTS:
        base = {"problem": problem.name, "variant": variant.name}
        try:
            modules = export.export_problem(problem, device, variant)
        except export.NotExportable as e:
            rows.append({**base, "workload": "-", "exported": f"not exported: {e}"})
            continue
        sol = export.solution(problem, modules, variant)
        with export.judge_precision(problem) as (ref, _flags), tempfile.TemporaryDirectory() as tmp, \
                precheck.loaded_entry(sol, Path(tmp)) as entry:
            kw = {"options": dict(variant.options)} if variant.options else {"mode": variant.mode}
            torch._dynamo.reset()
            compiled = torch.compile(ref.run, dynamic=False, **kw)
            for w in problem.workloads:
                verdicts: dict[str, list[str]] = {"exported~eager": [], "compiled~eager": [], "exported~compiled": []}
                for s in range(seeds):
                    args = export._as_judged(list(make_inputs(d, w, device, seed=100 + s, reference=ref).values()))
                    with torch.no_grad():
                        eager = _outputs(ref.run(*export._clone(args)))
                        comp = _outputs(compiled(*export._clone(args)))
                    try:
                        got = _call(entry, problem, w, args, variant.cuda_graph, device)
                    except Exception as e:
                        got = None
                        verdicts["exported~eager"].append(f"NO: raised {type(e).__name__}: {str(e)[:120]}")
                    if got is not None:
                        verdicts["exported~eager"].append(_agree(names, got, eager, w.tolerance))
                        verdicts["exported~compiled"].append(_agree(names, got, comp, w.tolerance))
                    verdicts["compiled~eager"].append(_agree(names, comp, eager, w.tolerance))
                row = {**base, "workload": w.uuid}
                for k, vs in verdicts.items():
                    bad = [v for v in vs if v != "ok"]
                    row[k] = "-" if not vs else "ok" if not bad else f"{len(bad)}/{len(vs)} {bad[0]}"
                if child:
                    out = precheck.check(problem.select([w.uuid]), sol, device, timeout_s=600)
                    row["exported~eager (fresh process)"] = "ok" if out.ok else f"NO: {out.reason[:200]}"
                rows.append(row)
            torch._dynamo.reset()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("problems", nargs="+", type=Path, help="problem dirs (definition.json + workload.jsonl)")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--seeds", type=int, default=3, help="input sets per workload")
    p.add_argument("--child", action="store_true", help="also run the exported candidate in a fresh process")
    p.add_argument("--json", type=Path, help="also write the rows here, one JSON object a line")
    a = p.parse_args()
    rows = []
    for path in a.problems:
        got = check_problem(path, a.device, a.seeds, a.child)
        for r in got:
            print(" | ".join(f"{k}={v}" for k, v in r.items()), flush=True)
        rows += got
    if a.json:
        a.json.write_text("".join(json.dumps(r) + "\n" for r in rows))
    disagree = [r for r in rows if r.get("compiled~eager") == "ok" and r.get("exported~eager", "ok") != "ok"]
    print(f"{len(rows)} rows; exported disagrees where torch.compile agrees with eager: {len(disagree)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
