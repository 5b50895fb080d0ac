"""Registering the families' custom ops (namespace ``sf_subgraph``) once per process.

Each op has a plain-torch implementation (every device: the family's semantics, what the CPU runs and what
regions are checked against), a fake implementation (shapes only, for tracing and Inductor) and, where the
family has one, a CUDA kernel. The agent imports this package and so does a candidate that ships it: the
first to register wins, and both register the same code.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

NAMESPACE = "sf_subgraph"


def existing(name: str) -> Any | None:
    try:
        return getattr(getattr(torch.ops, NAMESPACE), name)
    except AttributeError:
        return None


def define(name: str, impl: Callable[..., Any], fake: Callable[..., Any],
           cuda: Callable[..., Any] | None = None) -> Any:  # fmt: skip
    """``torch.ops.sf_subgraph.<name>``: ``impl`` everywhere, ``cuda`` on CUDA tensors, ``fake`` for tracing."""
    if (op := existing(name)) is not None:
        return op
    schema = torch.library.infer_schema(impl, mutates_args=())
    op_def = torch.library.custom_op(f"{NAMESPACE}::{name}", _contiguous(impl), mutates_args=(), schema=schema)
    op_def.register_fake(fake)
    if cuda is not None:
        op_def.register_kernel("cuda", _contiguous(cuda))
    return getattr(getattr(torch.ops, NAMESPACE), name)


def _contiguous(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with contiguous results: the layout the fake implementations declare, which Inductor relies on
    (SDPA, for one, returns its output laid out [b, s, h, d])."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.contiguous() if isinstance(o, torch.Tensor) else o for o in out)
        return out.contiguous() if isinstance(out, torch.Tensor) else out

    return wrapped
