"""``solforge sol``: speed-of-light time of every workload of one or more problems."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .options import json_option, problem_dirs_under

HARDWARE_CHOICES = ("B200", "H200", "H100", "measured", "auto")

_COLUMNS = ("problem", "uuid", "macs", "bytes", "precision", "t_compute_ms", "t_memory_ms", "t_sol_ms", "bound")


def _table_row(values: dict) -> str:
    cells = [
        f"{values['problem'][:32]:<32}",
        f"{values['uuid'][:14]:<14}",
        f"{values['macs']:>14.4g}",
        f"{values['bytes']:>12.4g}",
        f"{values['precision']:>6}",
        f"{values['t_compute_ms'] * 1e3:>11.4g}",
        f"{values['t_memory_ms'] * 1e3:>11.4g}",
        f"{values['t_sol_ms'] * 1e3:>11.4g}",
        f"{values['bound']:>7}",
    ]
    return "  ".join(cells)


_HEADER = "  ".join(
    [f"{'problem':<32}", f"{'uuid':<14}", f"{'MACs':>14}", f"{'bytes':>12}", f"{'prec':>6}",
     f"{'compute_us':>11}", f"{'memory_us':>11}", f"{'T_SOL_us':>11}", f"{'bound':>7}"]  # fmt: skip
)


@click.command("sol")
@click.argument("problem_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--hardware", default="B200", show_default=True, type=click.Choice(HARDWARE_CHOICES, case_sensitive=False),
    help="Hardware model; 'measured' probes --device once (cached), 'auto' picks by the device present.",
)  # fmt: skip
@click.option(
    "--device", default="cpu", show_default=True,
    help="Device probed for 'measured' and 'auto', and where references that need real data run.",
)  # fmt: skip
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Cache of measured profiles [~/.cache/solforge].")
@click.option(
    "--real-cap-mib", default=1024, show_default=True,
    help="References that need real data (nonzero, .item()) run on --device when their inputs fit this.",
)  # fmt: skip
@json_option
def sol_command(problem_dirs, hardware, device, cache_dir, real_cap_mib, as_json) -> None:
    """Speed-of-light time T_SOL = max(MACs / peak, fused bytes / bandwidth) per workload.

    A PROBLEM_DIR may hold many problems (searched recursively). With --json: one object per workload with
    problem, uuid, macs, bytes, precision, t_compute_ms, t_memory_ms, t_sol_ms, bound, hardware; a workload
    that cannot be analysed gives problem, uuid and error. Exit 1 if any could not be analysed.

    \b
    Example:
      solforge sol data/problems --hardware H200 --json
    """
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference
    from sol_bench.sol import SolAnalysisError, analyze_workload, get_hardware
    from sol_bench.inputs import InputContext

    model = get_hardware(hardware, device=device, cache_dir=cache_dir)
    failures = 0
    if not as_json:
        click.echo(f"hardware: {model.name} ({model.source})")
        click.echo(_HEADER)
    for d in problem_dirs_under(problem_dirs):
        problem = load_problem(d)
        reference = load_reference(problem.definition)
        for w in problem.workloads:
            try:
                r = analyze_workload(
                    problem.definition, w, model, reference=reference, real_device=device, real_cap_bytes=real_cap_mib << 20,
                    ctx=InputContext(problem_dir=problem.path),
                )  # fmt: skip
            except SolAnalysisError as e:
                failures += 1
                if as_json:
                    click.echo(json.dumps({"problem": problem.name, "uuid": w.uuid, "error": str(e)}))
                else:
                    click.echo(f"{problem.name[:32]:<32}  {w.uuid[:14]:<14}  cannot analyse: {e}", err=True)
                continue
            values = r.model_dump(mode="json")
            click.echo(json.dumps(values) if as_json else _table_row(values))
    sys.exit(1 if failures else 0)


def register(root: click.Group) -> None:
    root.add_command(sol_command)
