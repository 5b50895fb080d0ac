"""Export each problem's winner: a solution directory the judge accepts, and the custom-op package."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sol_bench.errors import InputError
from sol_bench.models import Solution
from sol_bench.problem import Problem, find_problems, load_problem
from solforge.store import report_queries as rq

from .package import ExportError, OpExport, op_name, write_package
from .signatures import judged_signatures
from .solution_dir import safe_name, write_solution_dir

SOLUTIONS = "solutions"


@dataclass(frozen=True)
class Exported:
    problem: str
    run_id: str
    candidate_id: str
    solution_json: Path
    op: str


@dataclass
class ExportResult:
    exported: list[Exported] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # problem -> why
    package: Path | None = None


def _problem_dirs(roots: Sequence[Path]) -> dict[str, Path]:
    """Problem name -> directory, for problems whose recorded path is gone."""
    out: dict[str, Path] = {}
    for root in roots:
        for d in find_problems(root):
            try:
                name = json.loads((d / "definition.json").read_text())["name"]
            except (OSError, ValueError, KeyError):
                continue
            out.setdefault(name, d)
    return out


def _load(w: rq.Winner, extra: dict[str, Path]) -> Problem:
    tried = [p for p in (w.problem_path and Path(w.problem_path), extra.get(w.problem)) if p]
    for p in tried:
        if (p / "definition.json").is_file():
            problem = load_problem(p)
            if problem.name == w.problem:
                return problem
    where = ", ".join(str(p) for p in tried) or "no path in the problems table"
    raise ExportError(f"{w.problem}: problem directory not found ({where}); pass --problems DIR")


def _device_type(problem: str, traces: list[dict]) -> str:
    devices = {str(t["device"] or "cpu").split(":")[0] for t in traces if t["status"] == "PASSED"}
    if len(devices) != 1:
        raise ExportError(f"{problem}: traces: judged on several device types {sorted(devices)}")
    return devices.pop()


def _op_export(data_dir: Path, w: rq.Winner, problem: Problem, solution: Solution, used: dict[str, str]) -> OpExport:
    d = problem.definition
    if any(s.is_scalar for s in d.outputs.values()):
        raise ExportError(f"{w.problem}: definition.json outputs: a custom op cannot return a scalar output")
    traces = rq.candidate_traces(data_dir, w.run_id, w.candidate_id)
    judged = judged_signatures(problem, [t["workload_uuid"] for t in traces if t["status"] == "PASSED"])
    if not judged:
        raise ExportError(f"{w.problem}: none of the judged workloads is in {problem.path}/workload.jsonl")
    name = op_name(w.problem)
    if name in used:
        raise ExportError(f"{w.problem}: its op name {name!r} is taken by problem {used[name]!r}")
    used[name] = w.problem
    return OpExport(
        op=name, definition=d, solution=solution, device_type=_device_type(w.problem, traces), judged=judged,
        provenance={"run_id": w.run_id, "candidate_id": w.candidate_id, "problem": w.problem,
                    "languages": [lang.value for lang in solution.spec.languages],
                    "sol_score": w.sol_score, "speedup_vs_t_b": w.speedup},
    )  # fmt: skip


def export_winners(
    data_dir: Path,
    out_dir: Path,
    runs: Sequence[str] | None = None,
    problems: Sequence[str] | None = None,
    problem_roots: Sequence[Path] = (),
) -> ExportResult:
    """Write ``out_dir/solutions/<problem>/`` and ``out_dir/solforge_kernels/`` for each winner over ``runs``
    (every run when None). A winner that cannot be exported is left out and named in ``skipped``."""
    runs = list(runs) if runs else rq.run_ids(data_dir)
    found = rq.winners(data_dir, runs, problems)
    result = ExportResult()
    for p in problems or ():
        if p not in {w.problem for w in found}:
            result.skipped[p] = f"{p}: no passing candidate in the runs asked for"
    extra = _problem_dirs(problem_roots)
    ops: list[OpExport] = []
    used: dict[str, str] = {}
    for w in found:
        try:
            sol_file = rq.solution_file(data_dir, w.run_id, w.candidate_id)
            if not sol_file.is_file():
                raise ExportError(f"{w.problem}: solution file {sol_file} is missing")
            solution = Solution.model_validate_json(sol_file.read_text())
            problem = _load(w, extra)
            sol_json = write_solution_dir(solution, out_dir / SOLUTIONS / safe_name(w.problem))
        except (ExportError, InputError, ValueError, OSError) as e:
            result.skipped[w.problem] = str(e)
            continue
        try:
            ops.append(_op_export(data_dir, w, problem, solution, used))
        except (ExportError, InputError, ValueError) as e:
            result.skipped[w.problem] = f"{e} (its solution directory is {sol_json.parent})"
            continue
        result.exported.append(Exported(w.problem, w.run_id, w.candidate_id, sol_json, ops[-1].op))
    if ops:
        result.package = write_package(ops, out_dir)
    return result
