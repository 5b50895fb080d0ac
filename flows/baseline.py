"""The baseline flow: measure each problem's T_b (best of eager, torch.compile, CUDA graphs) and store it."""

from __future__ import annotations

from prefect import flow

from solforge.judge_client import JudgeOptions
from solforge.store import ResultStore, check_run_id
from tasks.benchmark import benchmark_baseline
from tasks.store import store_rows

from .campaign import expand_problems, new_run_id
from .runtime import dask_runtime, gpu
from .runtime import data_dir as resolve_data_dir


@flow(name="baseline-rows")
def _baseline_on(run_id: str, store_dir: str, dirs: list[str], options: JudgeOptions) -> int:
    stored = []
    for d in dirs:
        with gpu():
            rows = benchmark_baseline.submit(run_id, d, store_dir, options)
        stored.append(store_rows.submit(store_dir, "baselines", rows))
    return sum(f.result().written for f in stored)


@flow(name="baseline")
def baseline(
    problems: list[str] | None = None,
    device: str = "auto",
    data_dir: str | None = None,
    run_id: str | None = None,
    dask_address: str | None = None,
    timeout_s: float = 60.0,
) -> int:
    """Measure T_b of every problem on the device; store it in ``baselines``; returns the rows written."""
    store_dir = resolve_data_dir(data_dir)
    ResultStore(store_dir).ensure_layout()
    run_id = check_run_id(run_id or "baseline-" + new_run_id())
    dirs = expand_problems(problems)
    with dask_runtime(device, dask_address) as rt:
        return _baseline_on.with_options(task_runner=rt.task_runner())(
            run_id, str(store_dir), dirs, JudgeOptions(device=rt.device, timeout_s=timeout_s, worker_devices=rt.devices)
        )
