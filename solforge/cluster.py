"""Dask placement: one worker per visible GPU holding the resource ``GPU=1``, plus CPU workers for builds.

Only the judging steps ask for ``GPU`` (``dask.annotate(resources={"GPU": 1})``), so two timings never
share a device. Without a GPU the CPU is the device: one worker holds ``GPU=1`` so judged timings still
never overlap. ``gpu_worker_devices`` is pure so it can be tested without GPUs.

For tests and benches of the scheduling, ``cpu_device_workers=N`` gives the CPU device N resource
workers (``device-cpu-0..N-1``): N judged runs may then overlap, so their timings mean nothing, but the
campaign sees N device slots as it would N GPUs (``solforge run --device cpu --cpu-device-workers N``).
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Mapping

GPU_RESOURCE = "GPU"
PRELOAD = "solforge.worker_preload"


def gpu_worker_devices(visible: str | None, device_count: int) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` value of each GPU worker, one per visible device.

    ``visible`` is the parent's ``CUDA_VISIBLE_DEVICES`` (None when unset): its entries (indices or
    ``GPU-…``/``MIG-…`` ids) are kept as written and in order; an empty value or one starting with
    ``-1`` hides every GPU, as CUDA does. When unset, devices ``0..device_count-1`` are used.
    """
    if visible is None:
        return [str(i) for i in range(max(0, device_count))]
    entries: list[str] = []
    for raw in visible.split(","):
        item = raw.strip()
        if not item or item.startswith("-"):
            break  # CUDA stops at the first invalid entry
        if item not in entries:
            entries.append(item)
    return entries


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    nthreads: int
    resources: dict[str, float]
    env: dict[str, str]


@dataclass(frozen=True)
class ClusterPlan:
    """The workers of a local cluster and the judge device string each GPU worker should use."""

    workers: tuple[WorkerSpec, ...]
    device: str  # the judge's --device on the resource workers: 'cuda' or 'cpu'
    gpus: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def plan_local_cluster(
    *, visible: str | None, device_count: int, cpu_count: int, device: str = "auto", cpu_workers: int | None = None,
    cpu_device_workers: int = 1,
) -> ClusterPlan:
    """Decide the local workers. ``device`` 'cpu' forces the CPU even when GPUs are visible.
    ``cpu_device_workers`` (tests and benches only) is how many workers hold the resource when the CPU is
    the device; it is ignored when a GPU is the device."""
    if cpu_device_workers < 1:
        raise ValueError(f"cpu_device_workers must be >= 1, not {cpu_device_workers}")
    gpus = [] if device == "cpu" else gpu_worker_devices(visible, device_count)
    if device.startswith("cuda") and not gpus:
        raise ValueError(f"--device {device}: no CUDA device is visible")
    if device.startswith("cuda:"):
        index = int(device.split(":", 1)[1])
        if not 0 <= index < len(gpus):
            raise ValueError(f"--device {device}: only {len(gpus)} CUDA device(s) visible")
        gpus = [gpus[index]]
    workers: list[WorkerSpec] = []
    if gpus:
        for i, dev in enumerate(gpus):
            workers.append(WorkerSpec(f"gpu-{i}", 1, {GPU_RESOURCE: 1}, {"CUDA_VISIBLE_DEVICES": dev}))
        judge_device = "cuda"
    else:
        if cpu_device_workers == 1:
            workers.append(WorkerSpec("device-cpu", 1, {GPU_RESOURCE: 1}, {"CUDA_VISIBLE_DEVICES": ""}))
        else:
            workers += [WorkerSpec(f"device-cpu-{i}", 1, {GPU_RESOURCE: 1}, {"CUDA_VISIBLE_DEVICES": ""})
                        for i in range(cpu_device_workers)]
        judge_device = "cpu"
    n_cpu = cpu_workers if cpu_workers is not None else max(1, min(4, cpu_count // 2))
    for i in range(n_cpu):
        workers.append(WorkerSpec(f"cpu-{i}", 2, {}, {"CUDA_VISIBLE_DEVICES": ""}))
    return ClusterPlan(workers=tuple(workers), device=judge_device, gpus=len(gpus))


def detect_plan(device: str = "auto", cpu_device_workers: int = 1) -> ClusterPlan:
    """``plan_local_cluster`` for this machine (asks torch how many devices CUDA sees)."""
    count = 0
    if device != "cpu":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return plan_local_cluster(
        visible=os.environ.get("CUDA_VISIBLE_DEVICES"), device_count=count, cpu_count=os.cpu_count() or 1, device=device,
        cpu_device_workers=cpu_device_workers,
    )


def worker_devices(plan: ClusterPlan) -> dict[str, str]:
    """Worker name -> CUDA_VISIBLE_DEVICES, for judges started by in-process workers."""
    return {w.name: w.env["CUDA_VISIBLE_DEVICES"] for w in plan.workers if GPU_RESOURCE in w.resources}


@contextmanager
def local_cluster(
    plan: ClusterPlan, env: Mapping[str, str] | None = None, *, processes: bool = False, log_level: int = logging.WARNING
) -> Iterator[str]:
    """Start the planned workers and yield the scheduler address.

    By default the workers are threads of this process: every device step runs the judge as a
    subprocess anyway, so worker processes would only add start-up time (imports, Prefect client).
    The judge then gets its ``CUDA_VISIBLE_DEVICES`` from ``worker_devices(plan)``. With
    ``processes=True`` each worker is its own process with the env of its spec. Dask logs at
    ``log_level`` (WARNING: its INFO lines would flood a run's output).
    """
    from distributed import Nanny, Scheduler, SpecCluster, Worker

    base_env = dict(env or {})
    workers = {}
    for w in plan.workers:
        options = {"nthreads": w.nthreads, "resources": dict(w.resources), "name": w.name, "memory_limit": 0}
        if processes:
            options |= {"env": base_env | w.env, "preload": [PRELOAD], "silence_logs": max(log_level, logging.ERROR)}
        workers[w.name] = {"cls": Nanny if processes else Worker, "options": options}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0", "host": "127.0.0.1"}}
    with _distributed_log_level(log_level):
        cluster = SpecCluster(scheduler=scheduler, workers=workers, silence_logs=log_level)
        try:
            cluster.wait_for_workers(len(workers), timeout=120)
            yield cluster.scheduler_address
        finally:
            _close_quietly(cluster)


class _ExpectedAtClose(logging.Filter):
    """Drops the connection-closed errors that in-process workers and clients log while the scheduler they
    talk to shuts down; any other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        from distributed.comm.core import CommClosedError
        from tornado.iostream import StreamClosedError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (CommClosedError, StreamClosedError)):
            return False
        return "CommClosedError" not in record.getMessage() and "StreamClosedError" not in record.getMessage()


def _close_quietly(cluster: object) -> None:
    """Close the cluster with the expected connection-closed errors of its shutdown filtered out."""
    quiet = _ExpectedAtClose()
    handlers = {h for name in ("", "distributed", "tornado", "asyncio") for h in logging.getLogger(name).handlers}
    for h in handlers:
        h.addFilter(quiet)
    try:
        cluster.close()  # type: ignore[attr-defined]
    finally:
        for h in handlers:
            h.removeFilter(quiet)


@contextmanager
def _distributed_log_level(level: int) -> Iterator[None]:
    """Dask's own loggers at ``level`` for the cluster's lifetime (its INFO lines flood a run's output)."""
    logger = logging.getLogger("distributed")
    saved = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(saved)
