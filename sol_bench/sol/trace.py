"""Run a reference once under dispatch hooks and count what the roofline needs.

``GraphCounter`` records, for one call of the reference: tensor-core MACs of matmul-like ops, the dtypes
those ops consumed (for precision detection), and how much of each external input was read or written.
Everything else is an intermediate and free. Works on meta tensors (no memory, no data) and on real
ones (for references whose control flow depends on data).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import macs as mac_rules

aten = torch.ops.aten


def _overloads(*names: str) -> frozenset:
    out = set()
    for name in names:
        packet = getattr(aten, name, None)
        if packet is not None:
            out.update(getattr(packet, o) for o in packet.overloads())
    return frozenset(out)


# Ops that take a tensor but read none of its values.
NO_READ = _overloads(
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided", "detach", "alias", "lift_fresh",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_nonzero",
)  # fmt: skip

# Ops whose source operand is read only where the indices point: count the gathered values.
GATHERS = _overloads("embedding", "index_select", "index", "gather", "take", "_unsafe_index")

# In-place ops that overwrite part of their destination without reading it.
SCATTERS = _overloads(
    "index_put_", "_index_put_impl_", "index_add_", "index_copy_", "scatter_", "scatter_add_",
    "scatter_reduce_", "index_fill_", "masked_scatter_", "index_reduce_",
)  # fmt: skip
OVERWRITES = _overloads("copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_")

# Grouped matmuls whose groups split the rows by an offsets tensor: only the groups that own rows read
# their weights, and which ones do is data (the routing).
GROUPED_MM = _overloads("_grouped_mm", "_scaled_grouped_mm", "_scaled_grouped_mm_v2")

# Scaled (fp8/fp4) matmuls: CPU has kernels for few of their scale layouts (none for blocked nvfp4 scales).
SCALED_MM = _overloads("_scaled_mm", "_scaled_mm_v2")


def _stand_in_scaled_mm(func, args, kwargs) -> torch.Tensor:
    """Output of a scaled matmul the tracing device cannot run: right shape and dtype, seeded random values.

    Only MACs and bytes are wanted from it; code after it that branches on values (top-k routing) sees
    values spread like a real product's, not ties."""
    from . import macs as rules

    bound = rules.bind(func, args, kwargs)
    a, b = bound["self"], bound["mat2"]
    dtype = bound.get("out_dtype") or torch.bfloat16
    gen = torch.Generator(device=a.device).manual_seed(0)
    shape = (*a.shape[:-1], b.shape[-1])
    return torch.randn(shape, generator=gen, device=a.device, dtype=torch.float32).to(dtype)


@dataclass
class InputUse:
    """How much of one external input's storage the graph touched, in bytes."""

    name: str
    size: int
    dtype: torch.dtype | None = None
    intervals: list[tuple[int, int]] = field(default_factory=list)
    strided: dict[tuple, int] = field(default_factory=dict)
    gathered: int = 0
    written: int = 0

    def read_bytes(self) -> int:
        covered = 0
        end = -1
        for lo, hi in sorted(self.intervals):
            if hi <= end:
                continue
            covered += hi - max(lo, end)
            end = hi
        return min(self.size, covered + sum(self.strided.values()) + self.gathered)

    def written_bytes(self) -> int:
        return min(self.size, self.written)


def _span(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))


@dataclass
class GraphCounter:
    """Counts of one traced call."""

    macs: int = 0
    matmul_dtypes: set[torch.dtype] = field(default_factory=set)
    quantised_dtypes: set[torch.dtype] = field(default_factory=set)
    inputs: dict[int, InputUse] = field(default_factory=dict)
    ops: int = 0
    data_dependent: bool = False
    _suppress: int = 0

    def register_input(self, name: str, t: torch.Tensor) -> None:
        key = _storage_key(t)
        if key not in self.inputs:
            self.inputs[key] = InputUse(name=name, size=t.numel() * t.element_size(), dtype=t.dtype)

    def use_of(self, t: torch.Tensor) -> InputUse | None:
        return self.inputs.get(_storage_key(t))

    @contextmanager
    def no_macs(self) -> Iterator[None]:
        self._suppress += 1
        try:
            yield
        finally:
            self._suppress -= 1

    def add_macs(self, n: int, operands: tuple[torch.Tensor, ...]) -> None:
        if self._suppress:
            return
        self.macs += int(n)
        self.matmul_dtypes.update(t.dtype for t in operands if isinstance(t, torch.Tensor))

    def read(self, t: torch.Tensor) -> None:
        use = self.use_of(t)
        if use is None or t.numel() == 0:
            return
        isz = t.element_size()
        lo = t.storage_offset() * isz
        span = _span(t)
        if span == t.numel():
            use.intervals.append((lo, lo + span * isz))
        else:
            use.strided[(lo, tuple(t.shape), tuple(t.stride()), t.dtype)] = t.numel() * isz

    def gather(self, source: torch.Tensor, values: int) -> None:
        use = self.use_of(source)
        if use is not None:
            use.gathered += values * source.element_size()

    def write(self, dest: torch.Tensor, values: int) -> None:
        use = self.use_of(dest)
        if use is not None:
            use.written += values * dest.element_size()


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _tensors(x: Any) -> list[torch.Tensor]:
    return [v for v in tree_leaves(x) if isinstance(v, torch.Tensor)]


def _groups_read(bound: dict[str, Any]) -> int | None:
    """Groups of a row-split grouped matmul that own rows: counted from real offsets, bounded on meta."""
    a, b, offs = bound.get("self"), bound.get("mat2"), bound.get("offs")
    if offs is None or not isinstance(a, torch.Tensor) or a.dim() != 2 or b.dim() != 3:
        return None
    groups = int(b.shape[0])
    if offs.device.type == "meta":
        return min(groups, int(a.shape[0]))  # every row meets one group: no more groups than rows
    ends = offs.to(torch.int64).tolist()
    starts = [0, *ends[:-1]]
    return sum(1 for lo, hi in zip(starts, ends) if hi > lo)


def _scatter_values(func, bound: dict[str, Any], dest: torch.Tensor) -> int:
    """Values a scatter-like op writes into ``dest``."""
    name = func._schema.name.split("::")[-1]
    if name in ("index_put_", "_index_put_impl_"):
        idx = [i for i in bound.get("indices", []) if i is not None]
        if not idx or any(i.dtype == torch.bool for i in idx):
            return max(bound["values"].numel(), 1)
        shape = torch.broadcast_shapes(*(i.shape for i in idx))
        return math.prod(shape) * math.prod(dest.shape[len(bound["indices"]) :])
    if name in ("index_add_", "index_copy_", "index_reduce_"):
        return bound["source"].numel()
    if name in ("scatter_", "scatter_add_", "scatter_reduce_"):
        return bound["index"].numel()
    if name == "index_fill_":
        dim = bound["dim"] % max(dest.dim(), 1)
        return bound["index"].numel() * (dest.numel() // max(dest.shape[dim] if dest.dim() else 1, 1))
    if name == "masked_scatter_":
        return bound["source"].numel()
    return dest.numel()


class _Recorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing is compiled under this mode; not wrapping it in dynamo.disable spares a multi-second
        # import of torch._dynamo on the first trace of a process.
        return False

    def __init__(self, counter: GraphCounter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except (RuntimeError, ValueError, NotImplementedError):
            if func not in SCALED_MM:
                raise
            out = _stand_in_scaled_mm(func, args, kwargs)
        self._record(func, args, kwargs, out)
        return out

    def _record(self, func, args, kwargs, out) -> None:
        c = self.counter
        c.ops += 1
        counted = mac_rules.count(func, args, kwargs, out)
        if counted is not None:
            c.add_macs(*counted)
        for t in _tensors(out):
            if t.dtype in _QUANT_DTYPES and not getattr(func, "is_view", False):
                c.quantised_dtypes.add(t.dtype)
        if getattr(func, "is_view", False) or func in NO_READ or not c.inputs:
            return
        bound = mac_rules.bind(func, args, kwargs)
        hit = _groups_read(bound) if func in GROUPED_MM else None
        if hit is not None:
            c.data_dependent = True
        for arg in func._schema.arguments:
            value = bound.get(arg.name)
            tensors = _tensors(value)
            if not tensors:
                continue
            written = arg.alias_info is not None and arg.alias_info.is_write
            for t in tensors:
                if c.use_of(t) is None:
                    continue
                if written:
                    if func in SCATTERS:
                        c.write(t, _scatter_values(func, bound, t))
                    elif func in OVERWRITES or arg.name == "out" or arg.kwarg_only:
                        c.write(t, t.numel())
                    else:  # in-place read-modify-write
                        c.read(t)
                        c.write(t, t.numel())
                elif func in GATHERS and arg.name in ("self", "weight", "input"):
                    c.gather(t, sum(o.numel() for o in _tensors(out)[:1]))
                elif hit is not None and arg.name == "mat2":
                    c.gather(t, hit * (t.numel() // max(int(t.shape[0]), 1)))
                else:
                    c.read(t)


def _quant_dtypes() -> frozenset:
    names = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
             "float4_e2m1fn_x2")  # fmt: skip
    return frozenset(getattr(torch, n) for n in names if hasattr(torch, n))


_QUANT_DTYPES = _quant_dtypes()

_SDPA = F.scaled_dot_product_attention


def _is_device_like(x: Any) -> bool:
    return isinstance(x, torch.device) or (isinstance(x, str) and x.split(":")[0] in ("cuda", "cpu", "meta"))


class _Redirect(TorchFunctionMode):
    """Keeps every tensor on one device (``.cuda()``, ``device='cuda'`` in the reference) and counts SDPA
    at the function level, where causality and GQA are still visible."""

    def __init__(self, device: torch.device, counter: GraphCounter | None):
        super().__init__()
        self.device = device
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name in ("cuda", "cpu", "pin_memory") and args and isinstance(args[0], torch.Tensor):
            return args[0] if args[0].device == self.device else args[0].to(self.device)
        if "device" in kwargs and kwargs["device"] is not None:
            kwargs["device"] = self.device
        if name == "to":
            args = tuple(self.device if _is_device_like(a) else a for a in args)
        if func is _SDPA and self.counter is not None:
            return self._sdpa(args, kwargs)
        return func(*args, **kwargs)

    def _sdpa(self, args, kwargs):
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        bound = dict(zip(names, args)) | kwargs
        q, k, v = bound["query"], bound["key"], bound["value"]
        self.counter.add_macs(mac_rules.attention_macs(q, k, v, bool(bound.get("is_causal", False))), (q, k, v))
        with self.counter.no_macs():
            return _SDPA(*args, **kwargs)


@contextmanager
def on_device(device: torch.device | str) -> Iterator[None]:
    """Redirect device choices in problem code (custom input functions) to ``device``."""
    with _Redirect(torch.device(device), None):
        yield


@contextmanager
def recording(counter: GraphCounter, device: torch.device | str) -> Iterator[None]:
    """Count everything the code in the block does, keeping it on ``device``."""
    with torch.no_grad(), _Redirect(torch.device(device), counter), _Recorder(counter):
        yield
