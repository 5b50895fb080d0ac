"""Buffers shared between the judge and the candidate process.

CUDA: tensors from the judge's dedicated memory pool travel as CUDA IPC handles (torch's pickling).
CPU: the judge creates one file per buffer in a private directory under /dev/shm and maps it; the
candidate receives only ``ShmRef`` descriptors and maps the same files. No third process (such as
torch's shared-memory manager, which a candidate could crash) sits between them.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class ShmRef:
    path: str
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the "torch." prefix
    nbytes: int


def _map(path: str, shape: tuple[int, ...], dtype: torch.dtype, nbytes: int) -> torch.Tensor:
    raw = torch.from_file(path, shared=True, size=max(nbytes, 1), dtype=torch.uint8)
    return raw[:nbytes].view(dtype).reshape(shape)


def attach(obj: Any) -> Any:
    """Candidate side: turn a descriptor into a tensor over the judge's file; pass anything else through."""
    if isinstance(obj, ShmRef):
        return _map(obj.path, tuple(obj.shape), getattr(torch, obj.dtype), obj.nbytes)
    return obj


class SharedArena:
    """Judge side: allocates shared buffers for one evaluation and removes them at ``close``."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pool = torch.cuda.MemPool() if device.type == "cuda" else None
        self._dir: Path | None = None
        self._refs: dict[int, ShmRef] = {}
        self._n = 0

    def alloc(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if self.pool is not None:
            with torch.cuda.use_mem_pool(self.pool):
                return torch.empty(shape, dtype=dtype, device=self.device)
        if self._dir is None:
            base = "/dev/shm" if Path("/dev/shm").is_dir() else None
            self._dir = Path(tempfile.mkdtemp(prefix="solforge-judge-", dir=base))
        self._n += 1
        path = self._dir / f"buf-{self._n}"
        nbytes = int(torch.Size(shape).numel()) * torch.empty((), dtype=dtype).element_size()
        with open(path, "wb") as f:
            f.truncate(max(nbytes, 1))
        t = _map(str(path), tuple(shape), dtype, nbytes)
        self._refs[id(t)] = ShmRef(str(path), tuple(int(s) for s in shape), str(dtype).removeprefix("torch."), nbytes)
        return t

    def wire(self, obj: Any) -> Any:
        """What to put in a message for ``obj``: a descriptor for CPU buffers, the tensor itself on CUDA."""
        if isinstance(obj, torch.Tensor) and self.pool is None:
            ref = self._refs.get(id(obj))
            if ref is None:
                raise ValueError("only buffers allocated by this arena can be shared")
            return ref
        return obj

    def close(self) -> None:
        self._refs.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
