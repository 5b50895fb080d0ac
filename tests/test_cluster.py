"""GPU placement: CUDA_VISIBLE_DEVICES per worker and the local cluster plan (no GPU needed)."""

from __future__ import annotations

import pytest

from solforge.cluster import GPU_RESOURCE, gpu_worker_devices, plan_local_cluster


@pytest.mark.parametrize(
    "visible, count, expected",
    [
        (None, 0, []),
        (None, 2, ["0", "1"]),
        ("3,1", 8, ["3", "1"]),
        (" 2 , 5 ", 8, ["2", "5"]),
        ("", 4, []),
        ("-1", 4, []),
        ("0,-1,2", 4, ["0"]),
        ("GPU-aaaa,GPU-bbbb", 0, ["GPU-aaaa", "GPU-bbbb"]),
        ("1,1,2", 4, ["1", "2"]),
    ],
)
def test_gpu_worker_devices(visible, count, expected):
    assert gpu_worker_devices(visible, count) == expected


def test_one_resource_worker_per_gpu_plus_cpu_workers():
    plan = plan_local_cluster(visible="4,5", device_count=8, cpu_count=16)
    gpu = [w for w in plan.workers if GPU_RESOURCE in w.resources]
    assert [w.env["CUDA_VISIBLE_DEVICES"] for w in gpu] == ["4", "5"]
    assert all(w.resources[GPU_RESOURCE] == 1 and w.nthreads == 1 for w in gpu)
    cpu = [w for w in plan.workers if not w.resources]
    assert cpu and all(w.env["CUDA_VISIBLE_DEVICES"] == "" for w in cpu)
    assert plan.device == "cuda" and plan.gpus == 2


def test_without_gpu_the_cpu_is_the_device_and_one_worker_holds_the_resource():
    plan = plan_local_cluster(visible=None, device_count=0, cpu_count=2)
    holders = [w for w in plan.workers if GPU_RESOURCE in w.resources]
    assert plan.device == "cpu" and len(holders) == 1 and holders[0].nthreads == 1


def test_device_cuda_n_pins_one_gpu_and_cpu_forces_cpu():
    plan = plan_local_cluster(visible="2,3", device_count=4, cpu_count=8, device="cuda:1")
    assert [w.env["CUDA_VISIBLE_DEVICES"] for w in plan.workers if w.resources] == ["3"]
    assert plan_local_cluster(visible="0", device_count=1, cpu_count=4, device="cpu").device == "cpu"
    with pytest.raises(ValueError):
        plan_local_cluster(visible="", device_count=0, cpu_count=2, device="cuda")
    with pytest.raises(ValueError):
        plan_local_cluster(visible="0", device_count=1, cpu_count=2, device="cuda:1")


def test_cpu_device_workers_give_the_cpu_n_device_slots_and_are_ignored_with_a_gpu():
    plan = plan_local_cluster(visible=None, device_count=0, cpu_count=4, cpu_device_workers=3)
    holders = [w.name for w in plan.workers if GPU_RESOURCE in w.resources]
    assert plan.device == "cpu" and holders == ["device-cpu-0", "device-cpu-1", "device-cpu-2"]
    gpu = plan_local_cluster(visible="0", device_count=1, cpu_count=4, cpu_device_workers=3)
    assert [w.name for w in gpu.workers if GPU_RESOURCE in w.resources] == ["gpu-0"]
    with pytest.raises(ValueError):
        plan_local_cluster(visible=None, device_count=0, cpu_count=4, cpu_device_workers=0)
