"""The baseline flow: measure each problem's T_b (best of eager, torch.compile, CUDA graphs) and store it.

A problem that does not load, or whose baseline cannot be measured, becomes a ``failures`` row with its
reason; the other problems are still measured.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from solforge.judge_client import JudgeOptions
from solforge.store import ResultStore, check_run_id
from tasks.store import failure_row, store_failures

from .campaign import expand_problems, load_problems, measure_baselines, new_run_id
from .runtime import dask_runtime
from .runtime import data_dir as resolve_data_dir


@flow(name="baseline-rows")
def _baseline_on(run_id: str, store_dir: str, dirs: list[str], options: JudgeOptions) -> int:
    store, logger = ResultStore(store_dir), get_run_logger()
    problems, skipped = load_problems(dirs)
    for sk in skipped:
        logger.warning(f"problem left out: {sk.reason}")
    if skipped:
        store_failures(store, [failure_row(run_id, sk.path, "load", sk.reason, path=sk.path) for sk in skipped])
    return measure_baselines(run_id, store, problems, options)


@flow(name="baseline")
def baseline(
    problems: list[str] | None = None, device: str = "auto", data_dir: str | None = None, run_id: str | None = None,
    dask_address: str | None = None, timeout_s: float = 60.0,
) -> int:
    """Measure T_b of every problem on the device; store it in ``baselines`` (and what failed in
    ``failures``); returns the rows written."""
    store_dir = resolve_data_dir(data_dir)
    ResultStore(store_dir).ensure_layout()
    run_id = check_run_id(run_id or "baseline-" + new_run_id())
    dirs = expand_problems(problems)
    with dask_runtime(device, dask_address) as rt:
        return _baseline_on.with_options(task_runner=rt.task_runner())(
            run_id, str(store_dir), dirs, JudgeOptions(device=rt.device, timeout_s=timeout_s, worker_devices=rt.devices)
        )
