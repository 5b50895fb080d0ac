"""What every flow needs around it: the data dir, the Dask cluster (local or given) and the judge device."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import dask
from prefect_dask import DaskTaskRunner

from solforge.cluster import GPU_RESOURCE, detect_plan, local_cluster, worker_devices

DEFAULT_DATA_DIR = "data"
_FORWARD_PREFIXES = ("PREFECT_", "SOLFORGE_", "LITELLM_", "OPENAI_", "ANTHROPIC_", "CUTE_DSL_", "TRITON_")


def data_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("SOLFORGE_DATA") or DEFAULT_DATA_DIR)


def worker_env() -> dict[str, str]:
    """Settings the flow's Dask workers must share with it (the Prefect API above all)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(_FORWARD_PREFIXES)}
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


@dataclass(frozen=True)
class Runtime:
    address: str
    device: str  # the judge's --device on the GPU workers
    gpu_slots: int  # judged runs that may happen at once
    devices: dict[str, str] = field(default_factory=dict)  # worker name -> CUDA_VISIBLE_DEVICES (local cluster)

    def task_runner(self) -> DaskTaskRunner:
        return DaskTaskRunner(address=self.address)


def gpu():  # noqa: ANN201 - a dask.annotate context manager
    """Ask Dask for one device: only verify and benchmark run under this."""
    return dask.annotate(resources={GPU_RESOURCE: 1})


def install_judge_servers(address: str, devices: dict[str, str] | None = None) -> None:
    """Give every worker (present and future) a long-lived judge process: saves the judge's start per candidate.
    The device workers named in ``devices`` (the local cluster's) start theirs at once.

    ``SOLFORGE_JUDGE_SERVER=0`` keeps one judge process per candidate (for comparison or debugging)."""
    if os.environ.get("SOLFORGE_JUDGE_SERVER", "1") == "0":
        return
    from distributed import Client

    from solforge.judge_server import JudgeServerPlugin

    with Client(address, timeout=30) as client:
        client.register_plugin(JudgeServerPlugin(devices))


@contextmanager
def dask_runtime(
    device: str = "auto", dask_address: str | None = None, cpu_device_workers: int = 1, prestart_judges: bool = False
) -> Iterator[Runtime]:
    """The Dask cluster of a run. ``prestart_judges``: the local cluster's device workers start their judge
    server at once (for runs that judge many candidates: it boots while the run starts up)."""
    if dask_address:
        from distributed import Client

        with Client(dask_address, timeout=30) as client:
            info = client.scheduler_info()
            slots = sum(int(w.get("resources", {}).get(GPU_RESOURCE, 0)) for w in info["workers"].values())
        if slots == 0:
            raise RuntimeError(f"no worker of {dask_address} holds the resource {GPU_RESOURCE}")
        install_judge_servers(dask_address)
        yield Runtime(dask_address, "cuda" if device == "auto" else device, slots)
        return
    plan = detect_plan(device, cpu_device_workers)
    with local_cluster(plan, env=worker_env()) as address:
        install_judge_servers(address, worker_devices(plan) if prestart_judges else None)
        yield Runtime(address, plan.device, len(worker_devices(plan)), worker_devices(plan))


def artifact_key(*parts: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes."""
    raw = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in raw).strip("-")[:100]
