"""Tensor-core MACs of matmul-like aten ops, from shapes alone.

Each counter takes the op's (args, kwargs, output) and returns ``(macs, operand tensors)``; the operands'
dtypes feed precision detection. Ops not listed here contribute no compute (element-wise work is left out
of the compute term by design).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

aten = torch.ops.aten


def _numel(shape) -> int:
    return math.prod(int(s) for s in shape)


def causal_pairs(q_len: int, kv_len: int) -> int:
    """Query/key pairs kept by torch's causal mask (top-left aligned: query i sees keys 0..i)."""
    if q_len <= kv_len:
        return q_len * (q_len + 1) // 2
    return kv_len * (kv_len + 1) // 2 + (q_len - kv_len) * kv_len


def attention_macs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> int:
    """QK^T plus PV MACs of attention over [..., L, E] queries, [..., S, E] keys and [..., S, Ev] values."""
    batch_heads = _numel(q.shape[:-2])
    q_len, e = int(q.shape[-2]), int(q.shape[-1])
    kv_len, ev = int(k.shape[-2]), int(v.shape[-1])
    pairs = causal_pairs(q_len, kv_len) if is_causal else q_len * kv_len
    return batch_heads * pairs * (e + ev)


def _product_of(first: int) -> Callable:
    """MACs of a (batched) matrix product whose operands are ``args[first]`` and ``args[first + 1]``: ``mm`` and
    ``bmm`` take them first, ``addmm`` and ``baddbmm`` after the tensor they add to."""

    def count(args, kwargs, out):
        a, b = args[first], args[first + 1]
        return _numel(a.shape) * int(b.shape[-1]), (a, b)

    return count


_mm = _product_of(0)  # also bmm
_addmm = _product_of(1)  # also baddbmm


def _mv(args, kwargs, out):
    return _numel(args[0].shape), (args[0], args[1])


def _addmv(args, kwargs, out):
    return _numel(args[1].shape), (args[1], args[2])


def _dot(args, kwargs, out):
    return _numel(args[0].shape), (args[0], args[1])


def _convolution(args, kwargs, out):
    x, w = args[0], args[1]
    transposed = bool(args[6]) if len(args) > 6 else bool(kwargs.get("transposed", False))
    kernel = _numel(w.shape[2:])
    if transposed:
        # weight [C_in, C_out/groups, k...]: every input element scatters into C_out/groups * k outputs.
        return _numel(x.shape) * int(w.shape[1]) * kernel, (x, w)
    # weight [C_out, C_in/groups, k...]: every output element gathers C_in/groups * k inputs.
    return _numel(out.shape) * int(w.shape[1]) * kernel, (x, w)


def _conv_nd(args, kwargs, out):
    x, w = args[0], args[1]
    return _numel(out.shape) * int(w.shape[1]) * _numel(w.shape[2:]), (x, w)


def _conv_transpose_nd(args, kwargs, out):
    x, w = args[0], args[1]
    return _numel(x.shape) * int(w.shape[1]) * _numel(w.shape[2:]), (x, w)


def _k_of(a: torch.Tensor, packed_fp4: bool) -> int:
    return int(a.shape[-1]) * (2 if packed_fp4 else 1)


def _is_packed_fp4(t: torch.Tensor) -> bool:
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    return fp4 is not None and t.dtype == fp4


def _scaled_mm(args, kwargs, out):
    a, b = args[0], args[1]
    k = _k_of(a, _is_packed_fp4(a))
    return _numel(a.shape[:-1]) * k * int(out.shape[-1]), (a, b)


def _grouped_mm(args, kwargs, out):
    """a [M, K] or [G, M, K] by b [K, N] or [G, K, N]; with 2-D operands groups split a dimension."""
    a, b = args[0], args[1]
    k = _k_of(a, _is_packed_fp4(a))
    if a.dim() == 2 and b.dim() == 2:  # groups split K: every output element still sums all of K
        return int(a.shape[0]) * int(b.shape[-1]) * k, (a, b)
    if a.dim() == 2:  # [M_total, K] x [G, K, N]: each row meets one group's weights
        return int(a.shape[0]) * k * int(b.shape[-1]), (a, b)
    if b.dim() == 2:  # [G, M, K] x [K, N_total]
        return _numel(a.shape[:-1]) * k * int(out.shape[-1]) // max(int(a.shape[0]), 1), (a, b)
    return _numel(a.shape[:-1]) * k * int(b.shape[-1]), (a, b)


def _sdpa_aten(args, kwargs, out):
    q, k, v = args[0], args[1], args[2]
    return attention_macs(q, k, v, bool(kwargs.get("is_causal", False))), (q, k, v)


_NAMED_ARGS = {"_sdpa_aten"}


def bind(func, args, kwargs) -> dict[str, Any]:
    """Argument name -> value of one aten call, defaults filled in."""
    bound: dict[str, Any] = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args):
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
    return bound


def _table() -> dict[Any, Callable]:
    t: dict[Any, Callable] = {}

    def add(name: str, fn: Callable) -> None:
        packet = getattr(aten, name, None)
        if packet is None:
            return
        for overload in packet.overloads():
            t[getattr(packet, overload)] = fn

    for name in ("mm", "_int_mm"):
        add(name, _mm)
    add("addmm", _addmm)
    add("_addmm_activation", _addmm)
    add("bmm", _mm)
    add("baddbmm", _addmm)
    add("mv", _mv)
    add("addmv", _addmv)
    add("dot", _dot)
    add("vdot", _dot)
    add("convolution", _convolution)
    add("_convolution", _convolution)
    for name in ("conv1d", "conv2d", "conv3d", "cudnn_convolution", "mkldnn_convolution"):
        add(name, _conv_nd)
    for name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        add(name, _conv_transpose_nd)
    add("_scaled_mm", _scaled_mm)
    add("_scaled_mm_v2", _scaled_mm)
    add("_grouped_mm", _grouped_mm)
    add("_scaled_grouped_mm", _grouped_mm)
    add("_scaled_grouped_mm_v2", _grouped_mm)
    for name in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
    ):
        add(name, _sdpa_aten)
    return t


COUNTERS = _table()


def count(func, args, kwargs, out) -> tuple[int, tuple[torch.Tensor, ...]] | None:
    """MACs and operands of one aten call, or None if it is not matmul-like."""
    fn = COUNTERS.get(func)
    if fn is None:
        return None
    if fn.__name__ in _NAMED_ARGS:
        kwargs = bind(func, args, kwargs)
    return fn(args, kwargs, out)
