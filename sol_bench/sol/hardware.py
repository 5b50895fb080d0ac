"""Hardware models for the speed-of-light roofline, as data.

A model is a DRAM bandwidth and a tensor-core MAC rate per precision. B200 is the SOL-ExecBench
leaderboard's own model (per-cycle rates at a locked 1.5 GHz); H200 and H100 use vendor dense peaks;
``measured`` probes the current device (copy bandwidth + one matmul) and caches the result, so that a
CPU or an unknown GPU has a roofline too.
"""

from __future__ import annotations

import os
import platform
import re
import time
from enum import Enum
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field


class Precision(str, Enum):
    """The rate a problem's matmul MACs are priced at."""

    nvfp4 = "nvfp4"
    fp8 = "fp8"
    fp16 = "fp16"
    bf16 = "bf16"
    tf32 = "tf32"
    fp32 = "fp32"
    fp64 = "fp64"


# Narrowest first: the problem's precision is the first of these that appears.
PRECISION_ORDER = (Precision.nvfp4, Precision.fp8, Precision.fp16, Precision.bf16, Precision.tf32,
                   Precision.fp32, Precision.fp64)  # fmt: skip


class HardwareModel(BaseModel):
    """Peak DRAM bandwidth and tensor-core MAC rates of one device."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Model name, e.g. 'B200'.")
    bandwidth_bytes_per_s: float = Field(gt=0, description="DRAM bytes per second (reads + writes).")
    macs_per_s: dict[Precision, float] = Field(description="Dense MACs per second per precision it supports.")
    fp32_matmul_as: Precision = Field(
        default=Precision.bf16,
        description="Rate fp32 (and fp64) matmul MACs are priced at; the leaderboard uses bf16 for B200.",
    )
    fp32_problem_bytes: float | None = Field(
        default=None,
        gt=0,
        description="Bytes per element for the fp32 tensors of a problem priced at fp32 precision; None: 4. "
        "The leaderboard's B200 table prices all-fp32 problems wholly as 16-bit (2).",
    )
    clock_ghz: float | None = Field(default=None, description="Clock the per-cycle rates assume, if any.")
    launch_floor_s: float = Field(
        default=0.0,
        ge=0,
        description="Fixed time added to every roofline: the leaderboard's B200 table adds 0.4 us per workload.",
    )
    source: str = Field(default="", description="Where the numbers come from.")

    def mac_rate(self, precision: Precision) -> float:
        """MACs per second for matmuls at ``precision``.

        fp16 runs at the bf16 rate; fp32/fp64 at ``fp32_matmul_as``; a precision the device lacks (nvfp4 on
        Hopper) at the fastest rate it has among the wider ones, since a kernel there must widen the data.
        """
        p = Precision(precision)
        if p is Precision.fp16 and p not in self.macs_per_s:
            p = Precision.bf16
        if p in (Precision.fp32, Precision.fp64):
            p = self.fp32_matmul_as
        if p in self.macs_per_s:
            return self.macs_per_s[p]
        wider = PRECISION_ORDER[PRECISION_ORDER.index(p) + 1 :]
        for q in wider:
            if q in self.macs_per_s:
                return self.macs_per_s[q]
        raise ValueError(f"hardware model {self.name} has no MAC rate for {p.value} or any wider precision")

    @property
    def slug(self) -> str:
        return slugify(self.name)


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def _per_cycle(clock_hz: float, **rates: float) -> dict[Precision, float]:
    return {Precision(k): v * clock_hz for k, v in rates.items()}


_B200_CLOCK = 1.5e9

B200 = HardwareModel(
    name="B200",
    bandwidth_bytes_per_s=5111.6 * _B200_CLOCK,
    macs_per_s=_per_cycle(
        _B200_CLOCK, nvfp4=2_415_000, fp8=1_207_501, bf16=603_751, fp16=603_751, tf32=301_875, fp32=40_251
    ),
    fp32_matmul_as=Precision.bf16,
    fp32_problem_bytes=2,
    clock_ghz=1.5,
    launch_floor_s=0.4e-6,
    source="SOL-ExecBench leaderboard model: 1.5 GHz, per-cycle DRAM bytes and dense MACs, 0.4 us launch floor",
)

# Vendor dense peaks (FLOP/s = 2 MACs), the same tensor cores on both Hopper parts. fp32 here is CUDA-core FMA;
# fp32 matmuls are priced at bf16 like the leaderboard does for B200, so a TF32 or split-bf16 kernel is never ruled
# faster than light.
_HOPPER_MACS = {Precision.fp8: 1979e12 / 2, Precision.bf16: 989e12 / 2, Precision.fp16: 989e12 / 2,
                Precision.tf32: 494e12 / 2, Precision.fp32: 67e12 / 2}  # fmt: skip


def _hopper(name: str, bandwidth_tb_s: float, memory: str) -> HardwareModel:
    return HardwareModel(
        name=name, bandwidth_bytes_per_s=bandwidth_tb_s * 1e12, macs_per_s=dict(_HOPPER_MACS),
        fp32_matmul_as=Precision.bf16,
        source=f"NVIDIA {name} SXM vendor peaks: {bandwidth_tb_s} TB/s {memory}, "
        "989 TFLOP/s dense bf16, 1979 fp8, 494 tf32",
    )  # fmt: skip


H200 = _hopper("H200", 4.8, "HBM3e")
H100 = _hopper("H100", 3.35, "HBM3")

BUILTIN: dict[str, HardwareModel] = {m.name: m for m in (B200, H200, H100)}

DEFAULT_CACHE_DIR = Path("~/.cache/solforge")


def device_name(device: str | torch.device) -> str:
    """A human name for the device: the GPU's name, or the CPU's model."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = ""
    return f"cpu {model or platform.processor() or platform.machine()} x{os.cpu_count()}"


def _best_seconds(fn, repeats: int, sync) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def probe(device: str | torch.device = "cpu") -> HardwareModel:
    """Measure copy bandwidth and matmul throughput of ``device`` (a second or two)."""
    dev = torch.device(device)
    is_cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if is_cuda else (lambda: None)
    n_bytes = (1 << 30) if is_cuda else (128 << 20)
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=dev).fill_(1.0)
    dst = torch.empty_like(src)
    t_copy = _best_seconds(lambda: dst.copy_(src), 5, sync)
    bandwidth = 2 * n_bytes / t_copy
    del src, dst
    rates: dict[Precision, float] = {}
    if is_cuda:
        n = 8192
        for prec, dt in ((Precision.bf16, torch.bfloat16), (Precision.fp32, torch.float32)):
            a = torch.randn(n, n, device=dev, dtype=dt)
            b = torch.randn(n, n, device=dev, dtype=dt)
            rates[prec] = n**3 / _best_seconds(lambda: a @ b, 5, sync)
        rates[Precision.fp16] = rates[Precision.bf16]
        capability = torch.cuda.get_device_capability(dev)
        # Not probed: tensor cores double the rate per halving of width where the architecture has them.
        if capability >= (8, 9):
            rates[Precision.fp8] = 2 * rates[Precision.bf16]
        if capability >= (10, 0):
            rates[Precision.nvfp4] = 4 * rates[Precision.bf16]
        fp32_as = Precision.bf16
    else:
        n = 1024
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        rates[Precision.fp32] = n**3 / _best_seconds(lambda: a @ b, 5, sync)
        fp32_as = Precision.fp32
    return HardwareModel(
        name=f"measured {device_name(dev)}",
        bandwidth_bytes_per_s=bandwidth,
        macs_per_s=rates,
        fp32_matmul_as=fp32_as,
        source=f"probe on {device_name(dev)}: {2 * n_bytes >> 20} MiB copy, {n}^3 matmul"
        + ("; fp8/nvfp4 extrapolated as 2x/4x bf16" if is_cuda else "; every precision at the fp32 rate"),
    )


def measured(device: str | torch.device = "cpu", cache_dir: Path | str | None = None, refresh: bool = False) -> HardwareModel:
    """The probed model of ``device``, from the cache when there is one."""
    root = Path(cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR).expanduser()
    path = root / "hardware" / f"measured-{slugify(device_name(device))}.json"
    if path.is_file() and not refresh:
        return HardwareModel.model_validate_json(path.read_text())
    model = probe(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(model.model_dump_json(indent=2))
    tmp.replace(path)
    return model


def auto_name(device: str | torch.device) -> str:
    """The built-in model matching the device present, or 'measured'."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return "measured"
    gpu = torch.cuda.get_device_name(dev).upper()
    for name in BUILTIN:
        if name in gpu:
            return name
    return "measured"


def get_hardware(name: str, device: str = "cpu", cache_dir: Path | str | None = None) -> HardwareModel:
    """``B200`` | ``H200`` | ``H100`` | ``measured`` | ``auto`` (case-insensitive)."""
    key = name.strip()
    if key.lower() == "auto":
        key = auto_name(device)
    if key.lower() == "measured":
        return measured(device, cache_dir)
    for builtin_name, model in BUILTIN.items():
        if builtin_name.lower() == key.lower():
            return model
    raise ValueError(f"unknown hardware {name!r}: choose from {', '.join([*BUILTIN, 'measured', 'auto'])}")
