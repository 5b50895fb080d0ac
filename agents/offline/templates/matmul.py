"""GEMM with an epilogue (bias, activation); attention lives in attention.py.

Reference shape (GEMM): ops {mm|addmm|matmul, t/permute, casts, add, relu|gelu|silu|tanh}; inputs a [..., K],
b [N, K] (linear weight) or [K, N], optional bias [N]; output [..., N].
Triton: the tiled GEMM of ``triton_gemm.py``; launcher: grid = cdiv(M, BM) * cdiv(N, BN). Where some workload
has more than ``PERSISTENT_MIN_M`` rows against a weight as stored, also the persistent kernel of
``kernels/gemm_persistent.py`` (one program per SM, tensor descriptors), whose launcher dispatches per call: calls
of more rows whose operands the copy engine can read take it, the others a tiled kernel.
CUDA C++ (decode shapes only): the GEMV kernels of ``gemv_cuda.py``; CuTe DSL: the GEMV of ``gemv_cute.py`` on
decode-shaped calls, cuBLAS on the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from ..subgraph.families import measure
from .base import (CUDA_FILE, TRITON_ARRIVAL_COUNTERS, Binding, Family, Rendered, Renderer, kernel_source,
                   py_signature, triton_launcher)
from .gemv_cuda import _CUDA_GEMV_SPLIT_KERNEL, SMALL_M, decode_shaped, render_gemm_cuda
from .gemv_cute import render_gemm_cute, some_decode_shaped
from .triton_gemm import BIAS_EPILOGUE, FIT_TILES, TMA_DESCRIPTORS, triton_gemm_kernel

__all__ = ["FIT_TILES", "GEMM", "SMALL_M", "_CUDA_GEMV_SPLIT_KERNEL", "match_gemm"]

_GEMM_OPS = {"mm", "addmm", "matmul", "t", "permute", "transpose", "_to_copy", "add", "relu", "gelu", "silu", "tanh",
             "view", "_unsafe_view", "expand", "clone", "reshape", "linear", "contiguous"}  # fmt: skip
_ACTS = ("relu", "gelu", "silu", "tanh")
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


def _torch_act(lin: str, act: str | None) -> str:
    return {None: lin, "relu": f"F.relu({lin})", "gelu": f"F.gelu({lin})", "silu": f"F.silu({lin})",
            "tanh": f"torch.tanh({lin})"}[act]


def render_gemm_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    a, w, bias = b.roles["a"], b.roles["b"], b.roles.get("bias")
    wt = w if b.consts["b_is_nk"] else f"{w}.t()"
    act = _torch_act(f"F.linear({a}, {wt}, {bias or 'None'})", b.consts["act"])
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    {_out(problem)}.copy_({act})
"""


def render_gemm_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> Rendered:
    """The tiled kernel at the grid's tile; the persistent variant instead chooses per call shape
    (``_persistent_parts``) and ships the chooser, ``families/measure.py``, as ``solforge_way.py``."""
    a, w, bias, y = b.roles["a"], b.roles["b"], b.roles.get("bias"), _out(problem)
    # strides of B as (k, n): an [N, K] weight is read transposed without a copy
    b_strides = "w.stride(1), w.stride(0)" if b.consts["b_is_nk"] else "w.stride(0), w.stride(1)"
    act = f"acc = _gemm_act(acc, {b.consts['act']!r})" if b.consts["act"] else ""
    epilogue = [line for line in (BIAS_EPILOGUE if bias else "", act) if line]
    tile = (p["bm"], p["bn"], p["bk"], p["num_warps"], p["stages"])
    head = ""
    if p.get("persistent"):
        tile = _FALLBACK_TILE
        head = _persistent_parts(b, p)
    src = f"""import torch
import torch.nn.functional as F
import triton
import triton.language as tl
{head and WAY_IMPORT}
{kernel_source("gemm_act.py")}
{triton_gemm_kernel("_gemm", epilogue)}
{triton_launcher()}
_gemm_launch = _Launcher(_gemm)
{head and _persistent_kernels(b)}


def _tiled(a2, w, bias, out):
    M, K = a2.shape
    N = out.shape[1]
    BM, BN, BK = {tile[0]}, {tile[1]}, {tile[2]}
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _gemm_launch(grid, a2, w, a2 if bias is None else bias, out, M, N, K, a2.stride(0), a2.stride(1), {b_strides},
                 out.stride(0), out.stride(1), BM=BM, BN=BN, BK=BK, GROUP=8,
                num_warps={tile[3]}, num_stages={tile[4]})
    return out
{head}


{py_signature(problem)}
    a2 = {a}.reshape(-1, {a}.shape[-1])
    c2 = {y}.view(-1, {y}.shape[-1])
    if c2.shape[0] == 0 or c2.shape[1] == 0:
        return
    {"_gemm_chosen" if head else "_tiled"}(a2, {w}, {bias or "None"}, c2)
"""
    if not head:
        return src
    return {"kernel.py": src, f"{WAY_MODULE}.py": Path(measure.__file__).read_text(encoding="utf-8")}


WAY_MODULE = "solforge_way"  # ``families/measure.py`` inside a candidate
WAY_IMPORT = f"from {WAY_MODULE} import DEFAULT, chosen_way\n"


def _persistent_kernels(b: Binding) -> str:
    kernels = f"\n{TMA_DESCRIPTORS}\n{kernel_source('gemm_persistent.py')}"
    if not b.consts["act"]:
        kernels += (triton_gemm_kernel("_gemm_split", [], split_k=True, sum_in_launch=True, tma=True) + FIT_TILES
                    + TRITON_ARRIVAL_COUNTERS + kernel_source("gemm_split_host.py"))
    return kernels


def _persistent_parts(b: Binding, p: Mapping[str, Any]) -> str:
    """The persistent variant's ``_gemm_chosen``: each call shape runs the fastest of the library's way (cuBLAS and
    the activation, what the reference does), the tiled kernel and, for calls of more than ``PERSISTENT_MIN_M``
    rows whose operands the copy engine reads, the persistent kernel or, where its tiles would leave SMs idle over
    a long K and the epilogue is linear (an activation of a partial sum is not the activation), K split in slices
    that the last slice of each tile adds up in the same launch (``kernels/gemm_split_host.py``; ``split``: "auto"
    fits it to the SMs, a number forces it). Measured on the shape's first call on a GPU (``chosen_way``: outputs
    checked against the library's, then timed); off CUDA (the interpreter) the planned kernel runs."""
    act = b.consts["act"] or "none"
    persistent = (f"gemm_persistent(a2, w, {p['bm']}, {p['bn']}, {p['bk']}, 8, {p['num_warps']}, {p['stages']}, "
                  f"{p['subtile']}, bias=bias, act={act!r}, out=out)")
    lib = _torch_act("F.linear(a2, w, bias)", b.consts["act"])
    # without an activation the library writes the buffer itself (F.linear of a matrix is this addmm), no copy
    lib_into = "torch.mm(a2, w.t(), out=out) if bias is None else torch.addmm(bias, a2, w.t(), out=out)"
    if b.consts["act"]:
        lib_into = f"out.copy_({lib})"
    split = "1"
    if act == "none":
        split = "split_for(a2, w)" if p.get("split", "auto") == "auto" else str(int(p["split"]))
    bias_ok = " and (bias is None or bias.is_contiguous())"
    return f"""
_CHOSEN = {{}}  # per call shape: the way its first call measured fastest


def _gemm_ways(a2, w, bias):
    \"\"\"Each way of this call, as a function of its output buffer (None: a new tensor).\"\"\"
    def library(out):
        return {lib} if out is None else {lib_into}

    def alloc(out):
        return torch.empty((a2.shape[0], w.shape[0]), dtype=a2.dtype, device=a2.device) if out is None else out

    ways = {{DEFAULT: library, "tiled": lambda out: _tiled(a2, w, bias, alloc(out))}}
    if a2.shape[0] > {PERSISTENT_MIN_M} and _tma_ready(a2, w){bias_ok}:
        split = {split}
        if split > 1:
            ways["split"] = lambda out: gemm_split(a2, w, split, bias=bias, out=alloc(out))
        else:
            ways["persistent"] = lambda out: {persistent}
    return ways


def _measured_here(t):
    return t.is_cuda  # off CUDA (the interpreter) nothing is timed: the planned kernel runs


def _gemm_chosen(a2, w, bias, c2):
    ways = _gemm_ways(a2, w, bias)
    if _measured_here(a2):
        key = (tuple(a2.shape), tuple(w.shape), str(a2.dtype), bias is not None)
        way = chosen_way(key, {{n: (lambda f=f: f(None)) for n, f in ways.items()}}, _CHOSEN, op="gemm")
    else:
        way = next(n for n in ("split", "persistent", "tiled") if n in ways)
    if way not in ways or (way != DEFAULT and way != "tiled" and not _tma_ready(c2)):
        way = DEFAULT  # this call's output buffer is not one the copy engine can write
    ways[way](c2)"""


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

