"""``solforge baseline``: time the eager reference and T_b (best optimized PyTorch) per workload, and store them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .options import data_dir_option, json_option, problem_dirs_under


@click.command("baseline")
@click.argument("problem_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N: where the reference runs.")
@data_dir_option
@click.option(
    "--variants", help="Comma-separated subset of: eager, compile-default, compile-max-autotune-no-cudagraphs, "
    "cudagraph-eager, cudagraph-compile-default [all the device supports].",
)  # fmt: skip
@click.option("--warmup", default=10, show_default=True, help="Warm-up calls per variant.")
@click.option("--iterations", default=50, show_default=True, help="Timed iterations per variant.")
@click.option("--seed", default=0, show_default=True, help="Input seed.")
@click.option("--data-root", type=click.Path(path_type=Path), help="Where safetensors inputs live.")
@click.option("--max-workloads", type=click.IntRange(min=1),
              help="Time only the N workloads of each problem that move the fewest bytes.")
@click.option("--no-save", is_flag=True, help="Measure and print only; store nothing.")
@click.option("--timer", type=click.Choice(["events", "cupti"]), default="events", show_default=True,
              help="CUDA timer; use the one the judge uses ('cupti': upstream's first-to-last GPU activity window).")
@click.option("--compiles", type=click.IntRange(min=1),
              help="Fresh compiles of each torch.compile variant; the fastest counts (Inductor picks kernel configs "
              "by timing, so one compile is one draw) [2 on CUDA, 1 on the CPU].")
@json_option
def baseline_command(problem_dirs, device, data_dir, variants, warmup, iterations, seed, data_root, max_workloads,
                     no_save, timer, compiles, as_json) -> None:  # fmt: skip
    """Time eager and T_b = best of torch.compile modes and CUDA-graph replay, per workload of each problem.

    Each torch.compile variant is compiled --compiles times afresh and its fastest draw counts.

    Stored as DATA_DIR/baselines/<device>/<problem>.json (one record per workload). A PROBLEM_DIR may hold
    many problems. With --json: one record per workload (problem, uuid, device_name, eager_ms, t_b_ms,
    best_variant, variants, failed, ...).

    A problem that does not load (file and field named) or whose baseline fails is reported on stderr and
    skipped; the others are measured. Exit status: 0 all measured, 1 some skipped, 2 none measured.

    \b
    Example:
      solforge baseline data/problems --device cuda --data-dir data --json
    """
    from sol_bench.baseline import BaselineConfig, measure_baselines, save_baselines
    from sol_bench.errors import InputError
    from sol_bench.inputs import InputContext
    from sol_bench.problem import load_problem

    chosen = tuple(v.strip() for v in variants.split(",") if v.strip()) if variants else None
    if compiles is None:
        compiles = 2 if device.startswith("cuda") else 1
    config = BaselineConfig(
        device=device, variants=chosen, warmup=warmup, iterations=iterations, seed=seed,
        ctx=InputContext(data_root=data_root), timer=timer, compiles=compiles,
    )  # fmt: skip
    try:
        config.chosen_variants()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--variants") from None
    if not as_json:
        click.echo(f"{'problem':<32}  {'uuid':<14}  {'eager_ms':>10}  {'T_b_ms':>10}  best variant")
    dirs = problem_dirs_under(problem_dirs)
    skipped = 0
    for d in dirs:
        try:
            problem = load_problem(d)
            if max_workloads is not None:
                problem = problem.select(problem.smallest_workloads(max_workloads))
            records = measure_baselines(problem, config)
            where = None if no_save else save_baselines(data_dir, records)
        except Exception as e:  # noqa: BLE001 - one problem's failure must not stop the others
            skipped += 1
            why = str(e) if isinstance(e, InputError) else f"{d}: {type(e).__name__}: {e}"
            click.echo(f"skipped: {why}", err=True)
            continue
        for r in records:
            if as_json:
                click.echo(json.dumps(r.model_dump(mode="json")))
            else:
                click.echo(f"{r.problem[:32]:<32}  {r.uuid[:14]:<14}  {r.eager_ms:>10.4f}  {r.t_b_ms:>10.4f}  "
                           f"{r.best_variant}")  # fmt: skip
        if where is not None and not as_json:
            click.echo(f"saved {where}", err=True)
    sys.exit(0 if not skipped else 2 if skipped == len(dirs) else 1)


def register(root: click.Group) -> None:
    root.add_command(baseline_command)
