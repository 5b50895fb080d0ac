"""GEMM with an epilogue (bias, activation); attention lives in attention.py.

Reference shape (GEMM): ops {mm|addmm|matmul, t/permute, casts, add, relu|gelu|silu}; inputs a [..., K],
b [N, K] (linear weight) or [K, N], optional bias [N]; output [..., N].
Triton: the tiled GEMM of ``triton_gemm.py``; launcher: grid = cdiv(M, BM) * cdiv(N, BN). Where some workload
has more than ``PERSISTENT_MIN_M`` rows against a weight as stored, also the persistent kernel of
``kernels/gemm_persistent.py`` (one program per SM, tensor descriptors), whose launcher dispatches per call: calls
of more rows whose operands the copy engine can read take it, the others a tiled kernel.
CUDA C++ (decode shapes only): the GEMV kernels of ``gemv_cuda.py``; CuTe DSL: the GEMV of ``gemv_cute.py`` on
decode-shaped calls, cuBLAS on the others.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_FILE, TRITON_ARRIVAL_COUNTERS, Binding, Family, Renderer, kernel_source, py_signature,
                   triton_launcher)
from .gemv_cuda import _CUDA_GEMV_SPLIT_KERNEL, SMALL_M, decode_shaped, render_gemm_cuda
from .gemv_cute import render_gemm_cute, some_decode_shaped
from .triton_gemm import BIAS_EPILOGUE, FIT_TILES, TMA_DESCRIPTORS, triton_gemm_kernel

__all__ = ["FIT_TILES", "GEMM", "SMALL_M", "_CUDA_GEMV_SPLIT_KERNEL", "match_gemm"]

_GEMM_OPS = {"mm", "addmm", "matmul", "t", "permute", "transpose", "_to_copy", "add", "relu", "gelu", "silu",
             "view", "_unsafe_view", "expand", "clone", "reshape", "linear", "contiguous"}  # fmt: skip
_ACTS = ("relu", "gelu", "silu")
PERSISTENT_MIN_M = 64  # fewer rows leave most of a persistent grid's programs without a tile
# the tiled kernel's tile where the persistent one cannot run (BM, BN, BK, num_warps, num_stages)
_FALLBACK_TILE = (64, 128, 64, 4, 4)



def _rows(problem: Problem, a: str) -> list[int]:
    """The rows of ``a`` (all dims but the last) in each of the problem's workloads."""
    spec, out = problem.definition.inputs[a], []
    for w in problem.workloads:
        shape = spec.concrete_shape(problem.definition.resolve_axes(w.axes))
        rows = 1
        for d in shape[:-1]:
            rows *= d
        out.append(rows)
    return out or [0]


def match_gemm(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not sig.has_any("mm", "addmm") or not sig.only(_GEMM_OPS) or sig.has("bmm"):
        return []
    d = problem.definition
    if len(d.outputs) != 1:
        return []
    out = next(iter(d.outputs.values())).shape or []
    tensors = {n: s.shape for n, s in d.inputs.items() if not s.is_scalar}
    if len(out) < 2 or len(tensors) not in (2, 3) or any(s.is_scalar for s in d.inputs.values()):
        return []
    acts = [a for a in _ACTS if sig.has(a)]
    if len(acts) > 1:
        return []
    consts = {"act": acts[0] if acts else None}
    bias = [n for n, s in tensors.items() if s == [out[-1]]]
    mats = [n for n in tensors if n not in bias[:1]]
    if len(mats) != 2 or len(tensors) - len(mats) != len(bias[:1]):
        return []
    a, b = mats
    if tensors[a][:-1] != out[:-1] or len(tensors[b]) != 2:
        return []
    roles = {"a": a, "b": b, **({"bias": bias[0]} if bias else {})}
    rows = _rows(problem, a)
    consts["max_m"], consts["min_m"] = max(rows), min(rows)
    out_b = []
    if tensors[b][0] == out[-1] and tensors[b][1] == tensors[a][-1]:
        out_b.append(Binding(roles, {**consts, "b_is_nk": True}))
    if tensors[b][1] == out[-1] and tensors[b][0] == tensors[a][-1]:
        out_b.append(Binding(roles, {**consts, "b_is_nk": False}))
    return out_b


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def render_gemm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias = b.roles["a"], b.roles["b"], b.roles.get("bias")
    wt = w if b.consts["b_is_nk"] else f"{w}.t()"
    lin = f"F.linear({a}, {wt}, {bias or 'None'})"
    act = {None: lin, "relu": f"F.relu({lin})", "gelu": f"F.gelu({lin})", "silu": f"F.silu({lin})"}[b.consts["act"]]
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_({act})
"""

def render_gemm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias, y = b.roles["a"], b.roles["b"], b.roles.get("bias"), _out(problem)
    # strides of B as (k, n): an [N, K] weight is read transposed without a copy
    b_strides = f"{w}.stride(1), {w}.stride(0)" if b.consts["b_is_nk"] else f"{w}.stride(0), {w}.stride(1)"
    act = f"acc = _gemm_act(acc, {b.consts['act']!r})" if b.consts["act"] else ""
    epilogue = [line for line in (BIAS_EPILOGUE if bias else "", act) if line]
    tile = (p["bm"], p["bn"], p["bk"], p["num_warps"], p["stages"])
    persistent, head = "", ""
    if p.get("persistent"):
        tile = _FALLBACK_TILE
        persistent, head = _persistent_parts(b, p, w, bias)
    return f"""import torch
import triton
import triton.language as tl

{kernel_source("gemm_act.py")}
{triton_gemm_kernel("_gemm", epilogue)}
{triton_launcher()}
_gemm_launch = _Launcher(_gemm)
{persistent}

{py_signature(problem)}
    a2 = {a}.reshape(-1, {a}.shape[-1])
    c2 = {y}.view(-1, {y}.shape[-1])
    M, K = a2.shape
    N = c2.shape[1]
    if M == 0 or N == 0:
        return{head}
    BM, BN, BK = {tile[0]}, {tile[1]}, {tile[2]}
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _gemm_launch(grid, a2, {w}, {bias or "a2"}, c2, M, N, K, a2.stride(0), a2.stride(1), {b_strides},
                 c2.stride(0), c2.stride(1), BM=BM, BN=BN, BK=BK, GROUP=8,
                num_warps={tile[3]}, num_stages={tile[4]})
"""


def _persistent_parts(b: Binding, p: Mapping[str, Any], w: str, bias: str | None) -> tuple[str, str]:
    """The persistent variant's kernels and the head of its ``run``: calls of more than ``PERSISTENT_MIN_M`` rows
    whose operands the copy engine reads take the persistent kernel or, where its tiles would leave SMs idle over a
    long K and the epilogue is linear (an activation of a partial sum is not the activation), K split in slices
    that the last slice of each tile adds up in the same launch (``kernels/gemm_split_host.py``; ``split``: "auto"
    fits it to the SMs, a number forces it)."""
    act = b.consts["act"] or "none"
    kernels = f"\n{TMA_DESCRIPTORS}\n{kernel_source('gemm_persistent.py')}"
    persistent = (f"gemm_persistent(a2, {w}, {p['bm']}, {p['bn']}, {p['bk']}, 8, {p['num_warps']}, {p['stages']}, "
                  f"{p['subtile']}, bias={bias or 'None'}, act={act!r}, out=c2)")
    split = "1"
    if act == "none":
        kernels += (triton_gemm_kernel("_gemm_split", [], split_k=True, sum_in_launch=True, tma=True) + FIT_TILES
                    + TRITON_ARRIVAL_COUNTERS + kernel_source("gemm_split_host.py"))
        split = "split_for(a2, " + w + ")" if p.get("split", "auto") == "auto" else str(int(p["split"]))
    bias_ok = f" and {bias}.is_contiguous()" if bias else ""
    return kernels, f"""
    if M > {PERSISTENT_MIN_M} and _tma_ready(a2, {w}, c2){bias_ok}:
        split = {split}
        if split > 1:
            gemm_split(a2, {w}, split, bias={bias or "None"}, out=c2)
        else:
            {persistent}
        return"""


def _takes_persistent(b: Binding) -> bool:
    return b.consts["b_is_nk"] and b.consts["max_m"] > PERSISTENT_MIN_M


GEMM = Family(
    "gemm", match_gemm,
    renderers=(
        Renderer("pytorch", False, {}, render_gemm_pytorch),
        # first where it binds: in bench/gemm_vs_cublas.py's large shapes (H200) the persistent kernel alone read
        # 86.4% of cuBLAS in geomean, the tiled one through descriptors 85.5% (through pointers, as below, 74% on an
        # H100); these are that bench's first two persistent tiles, not yet judged as candidates
        Renderer("triton", True, ({"persistent": (True,), "bm": (128,), "bn": (256,), "bk": (64,), "num_warps": (8,),
                                   "stages": (3,), "subtile": (True,), "split": ("auto",)},
                                  {"persistent": (True,), "bm": (128,), "bn": (128,), "bk": (64,), "num_warps": (8,),
                                   "stages": (4,), "subtile": (False,), "split": ("auto",)}),
                 render_gemm_triton, accepts=_takes_persistent),
        Renderer("triton", True, {"bm": (128, 64), "bn": (128, 256), "bk": (64,), "num_warps": (8,), "stages": (3, 4)},
                 render_gemm_triton),
        # Measured on one H200, in one call: the split kernel with a whole column a CTA led on all three
        # bundled linears: k4096 11.1 us at 256 threads (gemv_cols 12.4), k8192 7.4 (7.9), linear_bias 3.3 at
        # 512 threads (3.8). gemv_cols stays in the grid behind it. Dropped after measurement: a
        # streaming kernel of persistent CTAs (ahead only on k4096, by 4%) and an L2 evict-first
        # weight stream (no gain).
        Renderer("cuda_cpp", True,
                 ({"kernel": ("split",), "threads": (256, 128, 512)},
                  {"kernel": ("cols",), "threads": (128, 256), "ksplit": (4, 8)}),
                 render_gemm_cuda, file=CUDA_FILE, accepts=decode_shaped,
                 keep=lambda p: p["kernel"] == "split" or p["ksplit"] * 32 <= p["threads"]),
        # every decode-shaped workload by the CuTe GEMV, larger ones by cuBLAS (the launcher dispatches on rows);
        # not yet measured against the CUDA C++ GEMV: planned after it
        Renderer("cute_dsl", True, {"threads": (128, 256)}, render_gemm_cute, accepts=some_decode_shaped),
    ),
)

