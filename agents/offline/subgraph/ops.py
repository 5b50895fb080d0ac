"""Registering the families' custom ops (namespace ``sf_subgraph``) once per process.

Each op has a plain-torch implementation (every device: the family's semantics, what the CPU runs and what
regions are checked against), a fake implementation (shapes only, for tracing and Inductor) and, where the
family has one, a CUDA kernel. An op whose CUDA kernel's launcher takes ``out=`` (buffers to store its results in)
has a twin ``<name>_into`` that writes its results into buffers it is given (``outs``, mutated): where a graph
output is such an op's result, the candidate hands the judge's output buffer to the twin and no copy kernel follows
the op (``into.py``). Off CUDA the twin copies the op's results in. The agent imports this package and so does a
candidate that ships it: the first to register wins, and both register the same code.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import functools
import inspect
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
        if "out" in inspect.signature(cuda).parameters:
            _define_into(name, op_def._opoverload._schema, impl, cuda)
    return getattr(getattr(torch.ops, NAMESPACE), name)


INTO = "_into"  # the twin's name is the op's followed by this


def into_of(target: Any) -> Any | None:
    """The ``_into`` twin of an ``sf_subgraph`` op overload (None for any other target)."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.name.startswith(f"{NAMESPACE}::") or schema.name.endswith(INTO):
        return None
    twin = existing(schema.name.split("::", 1)[1] + INTO)
    return twin.default if twin is not None else None


def _define_into(name: str, schema: Any, impl: Callable[..., Any], cuda: Callable[..., Any]) -> None:
    # (an op whose kernel cannot store into a buffer gets no twin: copying its results in inside the op would cost
    # what Inductor's copy after it costs, and one kernel per output where Inductor fuses the copies into one)
    args = str(schema).split("(", 1)[1].rsplit(") -> ", 1)[0]
    twin = torch.library.custom_op(f"{NAMESPACE}::{name}{INTO}", _writing(impl), mutates_args=("outs",),
                                   schema=f"({args}, Tensor(a!)[] outs) -> ()")  # fmt: skip
    twin.register_fake(lambda *args, **kwargs: None)
    twin.register_kernel("cuda", _writing(cuda, takes_out=True))


def _writing(run: Callable[..., Any], takes_out: bool = False) -> Callable[..., None]:
    """``run`` as the twin calls it: its results into ``outs`` (by ``run(..., out=outs)`` where it takes that)."""

    def write(*args: Any, **kwargs: Any) -> None:
        if "outs" in kwargs:  # after keyword-only arguments, ``outs`` is one too
            outs = kwargs.pop("outs")
        else:
            *args, outs = args
        if takes_out:
            run(*args, **kwargs, out=tuple(outs))
            return
        results = run(*args, **kwargs)
        for dst, src in zip(outs, results if isinstance(results, tuple) else (results,), strict=True):
            dst.copy_(src)

    return write


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
