"""``solforge run``: a campaign of agents over problems, judged, stored and planned."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import click


def register(root: click.Group) -> None:
    root.add_command(run)


@click.command("run")
@click.argument("problem_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--agent", default="offline", show_default=True,
              help="offline | llm | reference | module:function (a factory of your own).")
@click.option("--language", default=None, help="Language the agents write (cuda_cpp, cute_dsl, triton, pytorch).")
@click.option("--model", default=None, help="litellm model name for --agent llm.")
@click.option("--api-base", default=None, help="OpenAI-compatible endpoint for --agent llm.")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N.")
@click.option("--max-candidates", type=click.IntRange(min=0), default=None,
              help="Attempts per problem at most, failed ones included (default: 3). The whole run is bounded by "
                   "--budget-minutes and --budget-usd.")
@click.option("--budget-minutes", type=float, default=None, help="Stop starting attempts after this many minutes.")
@click.option("--budget-usd", type=float, default=None,
              help="Money the run may spend (agents' calls, failed ones included, and the LLM planner's). Paid "
                   "calls then go one at a time, so the run stops within one call of it.")
@click.option("--planner", type=click.Choice(["rules", "llm"]), default="rules", show_default=True,
              help="Who allocates attempts: the rules, or an LLM reading the same statistics (its unusable "
                   "answers fall back to the rules, the reason stored with the round's decisions).")
@click.option("--planner-model", default=None, help="litellm model of --planner llm (default: --model).")
@click.option("--timeout", "timeout_s", type=float, default=60.0, show_default=True, help="Judge timeout per workload (s).")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Timed iterations per workload (judge default when unset; small values for quick CPU runs).")
@click.option("--baseline/--no-baseline", "measure_baseline", default=False, show_default=True,
              help="Measure T_b (best of eager, torch.compile, CUDA graphs) of problems that lack one on this "
                   "device before the first round; without it, T_b is the stored one or else eager.")
@click.option("--max-workloads", type=click.IntRange(min=1), default=None,
              help="Judge only the N smallest workloads of each problem (CPU default: 2).")
@click.option("--max-workload-mib", type=float, default=None,
              help="Judge only workloads moving at most this many MiB (CPU default: 64; problems with none are left out).")
@click.option("--cpu-device-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tests and benches: workers that hold the device when it is the CPU (N > 1 overlaps timings).")
@click.option("--dask-address", default=None, help="Use this Dask scheduler instead of a local cluster.")
@click.option("--data-dir", envvar="SOLFORGE_DATA", default="data", show_default=True, type=click.Path(file_okay=False),
              help="Where results are stored (env SOLFORGE_DATA).")
@click.option("--run-id", default=None, help="Name the run; the same id again resumes it.")
@click.option("--json", "as_json", is_flag=True, help="Print the final report as JSON.")
def run(problem_dirs: tuple[str, ...], agent: str, language: str | None, model: str | None, api_base: str | None,
        device: str, max_candidates: int | None, budget_minutes: float | None, budget_usd: float | None,
        timeout_s: float, iterations: int | None, measure_baseline: bool, max_workloads: int | None,
        max_workload_mib: float | None, cpu_device_workers: int, dask_address: str | None, data_dir: str,
        run_id: str | None, as_json: bool, planner: str, planner_model: str | None) -> None:
    """Run agents on problems (default: the bundled set in data/problems), judge every candidate, store
    every attempt under --data-dir and let the planner spend the attempts where the headroom is.

    A problem directory that does not load is reported (file and field) and left out; the others run. An
    agent or judge error on one problem (a malformed reply, a provider's timeout or 429) is stored as a row of
    the failures table, with its cost, and the run goes on. Each problem starts from what earlier runs in
    --data-dir judged: the best earlier solution and its feedback seed the agents.

    Without PREFECT_API_URL, one local Prefect server is started for the run (state under
    DATA_DIR/prefect) and stopped at the end. With no GPU, the CPU is the device.

    \b
    Example:
      solforge run data/problems --agent offline --max-candidates 4 --run-id nightly-1
    """
    import threading

    from solforge.prefect_env import prefect_api
    from solforge.store import check_run_id

    if run_id:
        check_run_id(run_id)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    # great-expectations takes seconds to import: let it load while the server and workers start
    warm = threading.Thread(target=importlib.import_module, args=("great_expectations",), daemon=True)
    warm.start()
    with prefect_api(Path(data_dir)) as api:
        click.echo(f"prefect API: {api.env['PREFECT_API_URL']}", err=True)
        from flows.campaign import campaign

        api.ready()
        out = campaign(
            problems=list(problem_dirs) or None, agent=agent, language=language, model=model,
            api_base=api_base, device=device, max_candidates=max_candidates, budget_minutes=budget_minutes,
            budget_usd=budget_usd, dask_address=dask_address, data_dir=data_dir, run_id=run_id,
            timeout_s=timeout_s, iterations=iterations, measure_baseline=measure_baseline, show_progress=True,
            max_workloads=max_workloads, max_workload_mib=max_workload_mib, cpu_device_workers=cpu_device_workers,
            planner=planner, planner_model=planner_model,
        )
    for sk in out.get("skipped_problems", []):
        click.echo(f"left out (does not load): {sk['reason']}", err=True)
    if as_json:
        click.echo(json.dumps({k: v for k, v in out.items() if k != "markdown"}, default=str))
    else:
        click.echo(out["markdown"])
        if out.get("failures"):
            click.echo(f"{out['failures']} failures outside the judge's verdicts: "
                       f"solforge sql \"SELECT * FROM failures WHERE run_id = '{out['run_id']}'\"")
        click.echo(f"run {out['run_id']}: {out['stop_reason']} after {out['wall_s']:.0f} s; "
                   f"query it with: solforge sql \"SELECT * FROM traces WHERE run_id = '{out['run_id']}'\"")
