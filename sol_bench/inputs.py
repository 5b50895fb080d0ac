"""Inputs for a workload: random tensors with varied distributions, scalars, custom and safetensors inputs.

Every draw derives from one integer seed (recorded in the trace), so a verdict can be replayed. The seed is
fresh per evaluation by default: no fixed public seed to tune against.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import dtypes
from .errors import ReferenceFailure, WorkloadError
from .models import Definition, TensorSpec, Workload
from .reference import Reference

_SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip

INT_HIGH = 64  # random integer inputs fall in [0, INT_HIGH); index-like inputs need a custom input function


def fresh_seed() -> int:
    return secrets.randbits(62)


def sub_seed(seed: int, *parts: object) -> int:
    h = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 2


@dataclass(frozen=True)
class InputContext:
    """Where inputs come from: the problem directory (for relative blobs) and an optional data root."""

    problem_dir: Path | None = None
    data_root: Path | None = None


def _generator(device: torch.device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def random_tensor(spec: TensorSpec, shape: tuple[int, ...], device: torch.device, seed: int) -> torch.Tensor:
    """A random tensor whose distribution varies with the seed (scale, offset, family)."""
    info = dtypes.info(spec.dtype)
    store = dtypes.storage_shape(spec.dtype, shape)
    if device.type == "meta":
        return torch.empty(store, dtype=info.torch_dtype, device=device)
    g = _generator(device, seed)
    if info.is_packed_fp4:
        raw = torch.randint(0, 256, store, dtype=torch.uint8, device=device, generator=g)
        return raw.view(info.torch_dtype) if info.torch_dtype != torch.uint8 else raw
    if info.torch_dtype == torch.bool:
        return torch.randint(0, 2, store, device=device, generator=g).bool()
    if not info.is_float:
        return torch.randint(0, INT_HIGH, store, dtype=info.torch_dtype, device=device, generator=g)
    # Per-tensor distribution: scale log-uniform in [0.25, 2], small offset, normal or uniform family.
    pick = torch.rand(3, generator=torch.Generator().manual_seed(seed))
    scale = float(0.25 * 8 ** pick[0])
    offset = float((pick[1] - 0.5) * 0.5)
    x = torch.empty(store, dtype=torch.float32, device=device)
    if pick[2] < 0.75:
        x.normal_(mean=offset, std=scale, generator=g)
    else:
        x.uniform_(offset - scale * 1.7, offset + scale * 1.7, generator=g)
    if info.torch_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        lim = torch.finfo(info.torch_dtype).max
        x.clamp_(-lim, lim)
    return x.to(info.torch_dtype)


def read_safetensors(path: Path, key: str) -> torch.Tensor:
    """Read one tensor from a safetensors file (format: u64 header size, JSON header, raw bytes)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        if key not in header:
            raise KeyError(key)
        meta = header[key]
        start, end = meta["data_offsets"]
        f.seek(8 + n + start)
        buf = bytearray(f.read(end - start))
    dt = _SAFETENSORS_DTYPES[meta["dtype"]]
    t = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
    return t.view(dt).reshape(meta["shape"])


def check_blobs(workloads, ctx: InputContext, where: str) -> None:
    """Every safetensors blob the workloads name exists (checked before anything is judged or printed)."""
    for w in workloads:
        for name, src in w.inputs.items():
            if src.type == "safetensors":
                try:
                    _blob(ctx, src.path, f"{where} (workload {w.uuid})")
                except WorkloadError as e:
                    raise WorkloadError(str(e).split(": ", 2)[-1], file=e.file, field=f"inputs.{name}.path") from None


def _blob(ctx: InputContext, rel: str, where: str) -> Path:
    candidates = []
    if ctx.problem_dir is not None:
        candidates.append(Path(ctx.problem_dir) / rel)
    if ctx.data_root is not None:
        candidates.append(Path(ctx.data_root) / rel)
    for c in candidates:
        if c.is_file():
            return c
    tried = ", ".join(str(c) for c in candidates) or "(no problem dir or data root)"
    raise WorkloadError(f"safetensors blob {rel!r} not found (looked in {tried})", file=where, field="inputs")


def make_inputs(
    definition: Definition,
    workload: Workload,
    device: torch.device | str,
    seed: int,
    reference: Reference | None = None,
    ctx: InputContext = InputContext(),
) -> dict[str, Any]:
    """All inputs of one workload, in the definition's order."""
    device = torch.device(device)
    env = definition.resolve_axes(workload.axes)
    where = f"workload {workload.uuid}"
    if any(s.type == "custom" for s in workload.inputs.values()):
        if reference is None or reference.custom_inputs is None:
            raise WorkloadError("custom inputs need the reference's custom_inputs_entrypoint", file=where)
        scalars = {n: s.value for n, s in workload.inputs.items() if s.type == "scalar"}
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            try:
                made = reference.custom_inputs({**env, **scalars}, device)
            except Exception as e:
                raise ReferenceFailure(f"custom input function failed: {type(e).__name__}: {e}") from e
        missing = set(definition.inputs) - set(made) - set(scalars)
        if missing:
            raise ReferenceFailure(f"custom input function did not make {sorted(missing)}")
        return {n: (scalars[n] if n in scalars and n not in made else made[n]) for n in definition.inputs}

    out: dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        src = workload.inputs.get(name)
        if src is not None and src.type == "scalar":
            out[name] = src.value
        elif src is not None and src.type == "safetensors":
            path = _blob(ctx, src.path, where)
            try:
                t = read_safetensors(path, src.tensor_key)
            except KeyError:
                raise WorkloadError(
                    f"tensor key {src.tensor_key!r} not in {path}", file=where, field=f"inputs.{name}"
                ) from None
            out[name] = t.to(device if device.type != "meta" else "meta")
        elif spec.is_scalar:
            raise WorkloadError(f"scalar input {name!r} has no value", file=where, field=f"inputs.{name}")
        else:
            out[name] = random_tensor(spec, spec.concrete_shape(env), device, sub_seed(seed, name))
    return out


def output_specs(definition: Definition, workload: Workload) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Storage shape and torch dtype of every output of a workload."""
    env = definition.resolve_axes(workload.axes)
    out = {}
    for name, spec in definition.outputs.items():
        shape = dtypes.storage_shape(spec.dtype, spec.concrete_shape(env))
        out[name] = (shape, dtypes.to_torch(spec.dtype))
    return out
