"""Ops whose fake-tensor rules refuse calls their real kernels take, stood in by custom ops during capture.

``torch._grouped_mm`` (a MoE layer's grouped GEMMs) runs in float16 and float32 on CUDA and the CPU through a
fallback, but its meta rule accepts bfloat16 only, so a reference calling it in another dtype neither traces
nor compiles (Inductor propagates shapes with the same rule). During capture such a call becomes
``sf_subgraph.grouped_mm``: the same computation (it calls ``torch._grouped_mm``), with a shape rule of its own;
the rest of the reference then traces, the families are found in it, and Inductor compiles around the call. On
CUDA the call runs the fastest of torch's fallback and a grouped GEMM with no host sync (``grouped_mm_kernel.py``),
so the whole layer can be one CUDA graph.

``torch.bincount(ids, minlength=m)`` (counting a MoE layer's tokens per expert) has no fake rule at all: its
length is ``max(m, ids.max() + 1)``, known only after the values are read, and on CUDA the read is a host sync,
so no CUDA graph holds it. Where ``minlength`` is given, the call becomes ``sf_subgraph.histogram``: ``m`` bins, the
length a problem declaring a count per expert promises; on CUDA the counts are a scatter-add with no host sync
(values outside ``[0, m)``, which would have made the reference's output longer than declared, are not counted;
the plain version raises on them). Every other call keeps its aten op (``NotImplemented``: tracing goes on with the
original).

``F.one_hot(ids, num_classes)`` reads ``ids``' range on the host even with ``num_classes`` given (to refuse values
outside it), which stops any trace; it is never dispatched as one aten op, so ``OneHot`` (a torch-function mode
held during capture) computes it as ``ids[..., None] == arange(num_classes)`` instead: the same for every input the
reference accepts (it raises on the others).

Shipped inside subgraph candidates: torch only (triton for the CUDA kernel, imported on first CUDA call).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from torch.overrides import TorchFunctionMode

from .ops import NAMESPACE, define


def _grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    try:
        return torch._grouped_mm(mat_a, mat_b, offs=offs)
    except RuntimeError:  # strides torch's kernels refuse (rows not a multiple of 16 bytes): a GEMM per group
        out = mat_a.new_zeros((mat_a.shape[0], mat_b.shape[-1]))
        start = 0
        for g, end in enumerate(offs.tolist()):
            out[start:end] = mat_a[start:end] @ mat_b[g]
            start = end
        return out


def _grouped_mm_fake(mat_a, mat_b, offs):
    return mat_a.new_empty((mat_a.shape[0], mat_b.shape[-1]))


def _grouped_mm_cuda(mat_a, mat_b, offs):
    from .grouped_mm_kernel import fastest_grouped_mm

    return fastest_grouped_mm(mat_a, mat_b, offs, lambda: _grouped_mm(mat_a, mat_b, offs))


GROUPED_MM = define("grouped_mm", _grouped_mm, _grouped_mm_fake, _grouped_mm_cuda)


def _grouped_mm_stand_in(mat_a: Any, mat_b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    """The 2-D by 3-D form with offsets (token rows sorted by expert against stacked expert weights) outside
    bfloat16, whose own rule traces."""
    plain = bias is None and out_dtype in (None, mat_a.dtype) and offs is not None
    if mat_a.dtype == torch.bfloat16 or not plain or mat_a.dim() != 2 or mat_b.dim() != 3:
        return NotImplemented
    return GROUPED_MM(mat_a, mat_b, offs)


def _histogram(ids: torch.Tensor, bins: int) -> torch.Tensor:
    counts = torch.bincount(ids, minlength=bins)
    if counts.numel() != bins:
        raise ValueError(f"histogram of {bins} bins: a value is {counts.numel() - 1}, past the last bin")
    return counts


def _histogram_fake(ids, bins):
    return ids.new_empty((bins,), dtype=torch.int64)


def _histogram_cuda(ids, bins):
    inside = (ids >= 0) & (ids < bins)
    at = torch.where(inside, ids, torch.zeros_like(ids)).long()
    return torch.zeros(bins, dtype=torch.int64, device=ids.device).scatter_add_(0, at, inside.long())


HISTOGRAM = define("histogram", _histogram, _histogram_fake, _histogram_cuda)


def _bincount_stand_in(ids: Any, weights: Any = None, minlength: int = 0) -> Any:
    """A count per value of a 1-D integer tensor into ``minlength`` bins (no weights)."""
    if weights is not None or not minlength or ids.dim() != 1 or ids.dtype.is_floating_point:
        return NotImplemented
    return HISTOGRAM(ids, minlength)


STAND_INS: dict[Any, Callable[..., Any]] = {
    torch.ops.aten._grouped_mm.default: _grouped_mm_stand_in,
    torch.ops.aten.bincount.default: _bincount_stand_in,
}
# what each stand-in changes about how a call runs, for a candidate's account of itself
STOOD_IN = {
    "grouped_mm": "grouped GEMM with no host sync",
    "histogram": "bincount with no host sync",
}


def stood_in(gm: torch.fx.GraphModule) -> list[tuple[str, str]]:
    """The stand-ins a captured graph calls: (name, what it changes) per call."""
    out = []
    for n in gm.graph.nodes:
        name = getattr(n.target, "__name__", "").split(".")[0] if n.op == "call_function" else ""
        if name in STOOD_IN and str(n.target).startswith(f"{NAMESPACE}."):
            out.append((name, STOOD_IN[name]))
    return out


class OneHot(TorchFunctionMode):
    """``F.one_hot`` with ``num_classes`` given, as a comparison with ``arange`` (traces with no host read)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.one_hot:
            ids, classes = args[0], args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            if classes > 0:
                return (ids.unsqueeze(-1) == torch.arange(classes, device=ids.device)).long()
        return func(*args, **kwargs)


def with_one_hot(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run under ``OneHot``: what a capture traces."""

    @functools.wraps(fn)  # the trace names its inputs after fn's parameters
    def traced(*args: Any) -> Any:
        with OneHot():
            return fn(*args)

    return traced
