"""Tracing a data-dependent workload too large to make: bulky values on meta, routing on real values.

An MoE layer decides which experts run from a small router product, yet its expert weights can take
gigabytes and its attention gigaflops. Under ``spilling``, a tensor the code creates above
``max_tensor_bytes`` lives on the meta device (shape only), and so does the result of any op that reads a
meta value or, as a matmul, exceeds ``max_macs``; a floating result of such an op that is not bulky is
replaced by a seeded random stand-in of its shape and dtype, so the code after it runs on real values.

The routing therefore sees values distributed like those of generated random inputs, and selects the
experts such inputs select (for top-k routing: the expected number of distinct experts). Integer and
boolean results of meta operands (indices, masks) stay on meta: a ``nonzero`` or ``.item()`` on them fails
with its cause instead of inventing indices. Bytes and MACs come from shapes, as on meta.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from . import macs as mac_rules

META = torch.device("meta")


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _Spill(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __init__(self, device: torch.device, max_tensor_bytes: int, max_macs: int, seed: int):
        super().__init__()
        self.device = device
        self.max_tensor_bytes = max_tensor_bytes
        self.max_macs = max_macs
        self.gen = torch.Generator(device=device).manual_seed(seed)
        # Real tensors an op with meta operands updated in place: their values are unknown from then on.
        self.stale: set[int] = set()

    def _unknown(self, t: torch.Tensor) -> bool:
        return t.device.type == "meta" or t.untyped_storage()._cdata in self.stale

    def _as_meta(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.device.type != "meta":
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=META)
        return x

    def _on_meta(self, func, args, kwargs) -> Any:
        args, kwargs = tree_map(self._as_meta, (args, dict(kwargs)))
        if "device" in kwargs:
            kwargs["device"] = META
        return func(*args, **kwargs)

    def _stand_in(self, t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or _nbytes(t) > self.max_tensor_bytes:
            return t
        x = torch.randn(t.shape, generator=self.gen, device=self.device, dtype=torch.float32)
        return x.to(t.dtype)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if not tensors:  # a creation: real unless bulky
            shaped = self._on_meta(func, args, kwargs)
            if any(_nbytes(t) > self.max_tensor_bytes for t in tree_leaves(shaped) if isinstance(t, torch.Tensor)):
                return shaped
            return func(*args, **kwargs)
        if any(self._unknown(t) for t in tensors) or self._too_much_work(func, args, kwargs):
            return self._spilled(func, args, kwargs)
        return func(*args, **kwargs)

    def _too_much_work(self, func, args, kwargs) -> bool:
        if func not in mac_rules.COUNTERS:
            return False
        meta_args, meta_kwargs = tree_map(self._as_meta, (args, dict(kwargs)))
        counted = mac_rules.count(func, meta_args, meta_kwargs, func(*meta_args, **meta_kwargs))
        return counted is not None and counted[0] > self.max_macs

    def _spilled(self, func, args, kwargs) -> Any:
        bound = mac_rules.bind(func, args, kwargs)
        written = [a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        targets = [bound[n] for n in written if isinstance(bound.get(n), torch.Tensor)]
        real_targets = [t for t in targets if t.device.type != "meta"]
        shaped = self._on_meta(func, args, kwargs)
        if real_targets:  # in place into a real tensor: leave its storage, stop trusting its values
            self.stale.update(t.untyped_storage()._cdata for t in real_targets)
            return targets[0] if len(targets) == 1 else tuple(targets)
        if targets or getattr(func, "is_view", False):  # a view keeps its base's storage, so reads stay counted
            return shaped
        return tree_map(self._stand_in, shaped)


@contextmanager
def spilling(device: torch.device | str, max_tensor_bytes: int, max_macs: int, seed: int = 0) -> Iterator[None]:
    """Run the block with bulky tensors and products on meta (see the module docstring)."""
    with _Spill(torch.device(device), max_tensor_bytes, max_macs, seed):
        yield


__all__ = ["spilling"]
