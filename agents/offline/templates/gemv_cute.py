"""GEMV in CuTe DSL for decode-shaped GEMMs with an epilogue (bias, relu / gelu / silu / tanh), the family's second
kernel language beside the CUDA C++ GEMV of ``gemv_cuda.py``.

``kernels/gemv_cute.py``: one CTA per output column; each thread loads its whole share of the weight row in
16-byte vectors before any arithmetic (a GEMV is bound by the weight's bytes), then dots it with every row of a,
and the warps' sums are added in warp order by one thread per row, which adds the bias and applies the
activation in fp32 before the one rounding to the output dtype. Compiled on the first call per dtype and shape;
calls of more than ``MAX_ROWS`` rows (the file's constant, SMALL_M here) run torch's linear and activation.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .base import Binding, kernel_source, py_signature, set_constant
from .gemv_cuda import SMALL_M

_FILE = "gemv_cute.py"
_KERNEL = kernel_source(_FILE)
_ACT_CODE = {None: 0, "relu": 1, "gelu": 2, "silu": 3, "tanh": 4}


def some_decode_shaped(b: Binding) -> bool:
    """An [N, K] weight and at least one workload of at most SMALL_M rows (the others go to cuBLAS)."""
    return bool(b.consts["b_is_nk"]) and b.consts.get("min_m", SMALL_M + 1) <= SMALL_M


def render_gemm_cute(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias, y = b.roles["a"], b.roles["b"], b.roles.get("bias"), next(iter(problem.definition.outputs))
    src = _KERNEL
    for name, value in {"THREADS": int(p["threads"]), "HAS_BIAS": bias is not None,
                        "ACT": _ACT_CODE[b.consts["act"]]}.items():  # fmt: skip
        src = set_constant(src, _FILE, name, value)
    return f"""{src}

{py_signature(problem)}
    _gemv({a}, {w}, {bias or "None"}, {y})
"""
