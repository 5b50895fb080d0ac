"""The CPUs attached to a GPU's NUMA node, where the candidate's process runs when it is timed on that GPU.

A process launching kernels from a core on the other socket writes every launch across the interconnect;
a judge that lets the scheduler place its candidate anywhere can time the same candidate fast in one
process and host-bound in the next. Linux publishes each PCI device's local CPUs in sysfs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def parse_cpulist(text: str) -> frozenset[int]:
    """A sysfs CPU list such as ``0-7,16-23`` (or an empty line) as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"not a CPU list: {text.strip()!r}")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


def format_cpulist(cpus: frozenset[int] | set[int]) -> str:
    """The inverse of :func:`parse_cpulist` (ranges merged)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def pci_address(device: torch.device) -> str | None:
    """The GPU's PCI address as sysfs spells it (``0000:1b:00.0``), or None where torch does not say."""
    import torch  # not at import: the candidate's process reads parse_cpulist before it may import torch

    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    ids = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    if any(not isinstance(i, int) for i in ids):
        return None
    return f"{ids[0]:04x}:{ids[1]:02x}:{ids[2]:02x}.0"


def local_cpus(address: str | None, sysfs: Path = Path("/sys")) -> frozenset[int] | None:
    """CPUs local to the PCI device at ``address`` that this process may also run on; None when unknown
    (no address, no sysfs entry, or no overlap with this process's own CPUs)."""
    if not address:
        return None
    try:
        text = (sysfs / "bus" / "pci" / "devices" / address / "local_cpulist").read_text()
        cpus = parse_cpulist(text) & frozenset(os.sched_getaffinity(0))
    except (OSError, ValueError):
        return None
    return cpus or None


def gpu_local_cpus(device: torch.device) -> frozenset[int] | None:
    """CPUs local to a CUDA device (see :func:`local_cpus`); None for other devices."""
    return local_cpus(pci_address(device))
