"""What the row-wise families (softmax, LayerNorm, RMSNorm) share: the tensor a row kernel reads, the eps
expression, and the Triton file around a normalization kernel of one program per row."""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .base import Binding, py_signature, triton_launcher

def triton_row_head(name: str, pointers: str) -> str:
    """The start of a rendered file whose kernel ``_<name>_row`` normalizes one row a program: imports, the
    kernel's signature (``pointers``, then n_cols, eps, BLOCK) and its first lines (the row, its columns and
    x's row in fp32 as ``xv``)."""
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _{name}_row({pointers}, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    xv = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
"""


def out_name(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def single_output_like(problem: Problem) -> tuple[str, list] | None:
    """(the one tensor input shaped like the one output, that shape), if there is exactly one."""
    d = problem.definition
    if len(d.outputs) != 1:
        return None
    out = next(iter(d.outputs.values()))
    xs = [n for n, s in d.inputs.items() if not s.is_scalar and s.shape == out.shape]
    if len(xs) != 1 or not out.shape:
        return None
    return xs[0], out.shape


def eps_expr(b: Binding) -> str:
    """eps in rendered code: the scalar input bound to it, or the literal read from the reference."""
    return b.roles.get("eps") or repr(b.consts["eps"])


def triton_row_run(problem: Problem, b: Binding, p: Mapping[str, Any], name: str, tensors: str) -> str:
    """The end of a rendered file whose kernel ``_<name>_row(<tensors>, n_cols, eps, BLOCK)`` normalizes one row
    a program: its launcher and ``run``, one program per row of x."""
    x, call = b.roles["x"], f"    _{name}_launch("
    return f"""{triton_launcher()}
_{name}_launch = _Launcher(_{name}_row)


{py_signature(problem)}
    n_cols = {x}.shape[-1]
    rows = {x}.numel() // n_cols
    if rows == 0:
        return
{call}(rows,), {tensors}, n_cols, float({eps_expr(b)}),
{" " * len(call)}BLOCK=triton.next_power_of_2(n_cols), num_warps={p["num_warps"]})
"""
