"""``solforge eval``: judge one candidate on every workload of a problem."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import device_option, json_option


@click.command("eval")
@click.argument("problem_dir", type=click.Path(path_type=Path))
@click.option("--solution", "solution_path", required=True, type=click.Path(path_type=Path), help="solution.json")
@device_option
@json_option
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Also write the traces (JSONL) here.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds per workload.")
@click.option("--compile-timeout", default=600.0, show_default=True, help="Seconds for the build.")
@click.option("--seed", type=int, help="Input seed (default: fresh; every trace records it).")
@click.option("--iterations", default=50, show_default=True, help="Timed iterations per workload.")
@click.option("--warmup", default=10, show_default=True, help="Warm-up calls per workload.")
@click.option("--data-root", type=click.Path(path_type=Path), help="Where safetensors inputs live.")
@click.option("--workload", "workloads", multiple=True, help="Judge only this workload uuid (repeatable).")
@click.option("--max-workloads", type=int, help="Judge only the N workloads that move the fewest bytes.")
@click.option("--launch-preroll-us", type=click.FloatRange(min=0), default=None,
              help="CUDA: host launch time left out of the timed window (µs; default: the judge's, "
                   "sol_bench.timing.LAUNCH_PREROLL_US); also the most host work a candidate could hide there.")
@click.option("--timer", type=click.Choice(["events", "cupti"]), default="events", show_default=True,
              help="CUDA: 'events' between CUDA events after the pre-roll; 'cupti' upstream's window, first GPU "
                   "activity to last on any stream. T_b should come from the same timer (solforge baseline --timer).")
def eval_command(problem_dir, solution_path, device, as_json, output, timeout, compile_timeout, seed,
                 iterations, warmup, data_root, workloads, max_workloads, launch_preroll_us, timer) -> None:  # fmt: skip
    """Judge SOLUTION_JSON on every workload of PROBLEM_DIR: one trace per workload.

    Exit 0 when every workload PASSED, 1 otherwise, 2 on bad input, 3 when the judge itself failed.

    \b
    Example:
      solforge eval tests/fixtures/problems/rmsnorm_small --solution tests/fixtures/solutions/rmsnorm_pytorch.json --json
    """
    from sol_bench.cli import run_eval

    preroll = {} if launch_preroll_us is None else {"launch_preroll_us": launch_preroll_us}
    code = run_eval(problem_dir, solution_path, device, as_json, output, timeout, compile_timeout, seed,
                    iterations, warmup, data_root=data_root, workloads=list(workloads) or None,
                    max_workloads=max_workloads, timer=timer, **preroll)  # fmt: skip
    sys.exit(code)


def register(root: click.Group) -> None:
    root.add_command(eval_command)
