"""GEMM with an epilogue (bias, activation); attention lives in attention.py.

Reference shape (GEMM): ops {mm|addmm|matmul, t/permute, casts, add, relu|gelu|silu}; inputs a [..., K],
b [N, K] (linear weight) or [K, N], optional bias [N]; output [..., N].
Kernel: tiled tl.dot (WGMMA on Hopper) with fp32 accumulators, grouped program order for L2 reuse, the
epilogue applied before the one store. Launcher: grid = cdiv(M, BM) * cdiv(N, BN).
Notes at the bottom.
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import Binding, Family, Renderer, py_signature

_GEMM_OPS = {"mm", "addmm", "matmul", "t", "permute", "transpose", "_to_copy", "add", "relu", "gelu", "silu",
             "view", "_unsafe_view", "expand", "clone", "reshape", "linear", "contiguous"}  # fmt: skip
_ACTS = ("relu", "gelu", "silu")


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
    act = {
        None: "",
        "relu": "acc = tl.maximum(acc, 0.0)",
        "silu": "acc = acc * tl.sigmoid(acc)",
        "gelu": "acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))",
    }[b.consts["act"]]
    bias_line = "acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]" if bias else ""
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP * grid_n
    first_m = (pid // width) * GROUP
    rows_here = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % rows_here
    pid_n = (pid % width) // rows_here
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        av = tl.load(a_ptr + rm[:, None] * sam + ka[None, :] * sak, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        bv = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(av, bv, acc)
    {bias_line}
    {act}
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


{py_signature(problem)}
    a2 = {a}.reshape(-1, {a}.shape[-1])
    c2 = {y}.view(-1, {y}.shape[-1])
    M, K = a2.shape
    N = c2.shape[1]
    if M == 0 or N == 0:
        return
    BM, BN, BK = {p["bm"]}, {p["bn"]}, {p["bk"]}
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _gemm[grid](a2, {w}, {bias or "a2"}, c2, M, N, K, a2.stride(0), a2.stride(1), {b_strides},
                c2.stride(0), c2.stride(1), BM=BM, BN=BN, BK=BK, GROUP=8,
                num_warps={p["num_warps"]}, num_stages={p["stages"]})
"""


GEMM = Family(
    name="gemm",
    candidates=match_gemm,
    renderers=(
        Renderer("pytorch", False, {}, render_gemm_pytorch),
        Renderer(
            "triton", True,
            {"bm": (128, 64), "bn": (128, 256), "bk": (64,), "num_warps": (8,), "stages": (3, 4)},
            render_gemm_triton,
        ),  # fmt: skip
    ),
)

# Notes: the GEMM template handles K not a multiple of BK by masking; for bf16 inputs tl.dot accumulates in
# fp32 like cuBLAS.
