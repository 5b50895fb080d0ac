"""Multi-head self-attention blocks: out = SDPA(x·Wqᵀ+bq, x·Wkᵀ+bk, x·Wvᵀ+bv split into heads)·Woᵀ + bo.

Reference shape: ops {mm×4, bmm or an SDPA op, softmax, views/transposes, casts, add, mul}; inputs x [B, N, D]
shaped like the output, four [D, D] projection weights and optional [D] biases, told apart by the one letter
of q/k/v/o in their names (``wq``, ``q_proj_weight``, ``bo``, ...). The head count is not in the shapes:
the candidates are the reference's integer literals that split D into heads of 16–256, and D/64, D/128;
the probe keeps the one (with the biases) that reproduces the reference. No mask, no causality, the
default 1/sqrt(head_dim) scale (vision encoders); anything else fails the probe and binds nothing.
Kernels (Triton): the three input projections as one launch of the shared tiled GEMM (bias in its epilogue)
into one [3, B·N, D] buffer, the flash-attention kernel of ``attention.py`` on its head views (layout
``bshd``: no transposed copies), and the output projection GEMM into the output. ``pdl``: each launch by
programmatic dependent launch on sm_90 (``base.TRITON_GDC_PARAM``); ``fit`` False keeps the projections'
column tile as given instead of narrowing it to cover the SMs. Notes at the bottom.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .attention_triton import TRITON_HEAD_DIMS, TRITON_IMPORTS, triton_attention_source
from .base import Binding, Family, Renderer, graph_replayed, py_signature, triton_gdc
from .triton_gemm import BIAS_EPILOGUE, FIT_TILES, triton_gemm_kernel

_ALLOWED = {"mm", "addmm", "bmm", "baddbmm", "t", "transpose", "permute", "view", "_unsafe_view", "reshape", "expand",
            "clone", "contiguous", "_to_copy", "add", "mul", "div", "_softmax", "_safe_softmax", "alias", "linear",
            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_flash_attention", "scaled_dot_product_attention", "split", "unbind", "select"}  # fmt: skip
_LETTERS = ("q", "k", "v", "o")
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _letter(name: str) -> str | None:
    """The one projection letter in a parameter name, its w/b prefix or weight/bias word left aside."""
    core = re.sub(r"weight|bias|proj|^[wb]_?|_[wb]$", "", name.lower())
    found = {c for c in core if c in _LETTERS}
    return found.pop() if len(found) == 1 else None


def _width(problem: Problem, name: str) -> int:
    d = problem.definition
    return d.inputs[name].concrete_shape(d.resolve_axes(problem.workloads[0].axes))[-1]


def head_counts(reference: str, width: int) -> list[int]:
    """Head counts to probe: integer literals of the reference that split ``width`` into heads of 16–256,
    then the usual head dims' counts."""
    out = [int(m) for m in _INT.findall(reference)]
    out += [width // hd for hd in (64, 128) if width % hd == 0]
    return list(dict.fromkeys(h for h in out if h > 0 and width % h == 0 and 16 <= width // h <= 256))


def match_mha(problem: Problem, sig: OpSignature) -> list[Binding]:
    if sig.ops.get("mm", 0) + sig.ops.get("addmm", 0) != 4 or not sig.only(_ALLOWED):
        return []
    if not (sig.has("bmm") or any("scaled_dot_product" in op for op in sig.ops)):
        return []
    d = problem.definition
    if len(d.outputs) != 1 or not problem.workloads or any(s.is_scalar for s in d.inputs.values()):
        return []
    out = list(next(iter(d.outputs.values())).shape or [])
    if len(out) != 3:
        return []
    tensors = {n: list(s.shape or []) for n, s in d.inputs.items()}
    xs = [n for n, s in tensors.items() if s == out]
    if len(xs) != 1:
        return []
    x, width = xs[0], out[-1]
    roles: dict[str, str] = {"x": x}
    for name, shape in tensors.items():
        if name == x:
            continue
        letter = _letter(name)
        kind = "w" if shape == [width, width] else "b" if shape == [width] else None
        if letter is None or kind is None or f"{kind}{letter}" in roles:
            return []
        roles[f"{kind}{letter}"] = name
    if any(f"w{c}" not in roles for c in _LETTERS):
        return []
    width = _width(problem, x)
    return [Binding(roles, {"heads": h, "head_dim": width // h}) for h in head_counts(d.reference, width)]


def _out(problem: Problem) -> str:
    return next(iter(problem.definition.outputs))


def render_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    r = b.roles
    proj = {c: f"F.linear({r['x']}, {r['w' + c]}, {r.get('b' + c, 'None')})" for c in "qkv"}
    return f"""import torch
import torch.nn.functional as F

{py_signature(problem)}
    B, N, D = {r["x"]}.shape
    H = {b.consts["heads"]}
    q, k, v = (t.view(B, N, H, D // H).transpose(1, 2) for t in ({proj["q"]}, {proj["k"]}, {proj["v"]}))
    o = F.scaled_dot_product_attention(q, k, v)
    {_out(problem)}.copy_(F.linear(o.transpose(1, 2).reshape(B, N, D), {r["wo"]}, {r.get("bo", "None")}))
"""


def _render_launches(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    r, y, heads = b.roles, _out(problem), b.consts["heads"]
    attn = {"layout": "bshd", "scale": b.consts["head_dim"] ** -0.5, "causal": False, "gqa": "interleave"}
    # pdl: the launches after the first may be scheduled while the one before runs (TRITON_GDC_PARAM)
    pdl, gdc_line = triton_gdc(p, "a2")
    tiles = f"BM={p['bm']}, BK={p['bk']}, GROUP=8, num_warps={p['num_warps']}, num_stages={p['stages']}{pdl}"
    w = [r[f"w{c}"] for c in "qkv"]

    def bn(launches: int) -> str:
        # ``fit`` (default): narrow the column tile until the grid covers the SMs; off, the tile as given
        return f'_fit_bn(M, D, {p["bm"]}, {p["bn"]}, {launches}, sms)' if p.get("fit", True) else str(p["bn"])
    biased = [f"b{c}" in r for c in "qkv"]
    launches = []
    for i, c in enumerate("qkv"):
        kernel = "_proj_bias" if biased[i] else "_proj"
        launches.append(f"_launch[{kernel!r}](grid, a2, {w[i]}, {r.get('b' + c, 'a2')}, qkv[{i}], M, D, D, "
                        f"a2.stride(0), a2.stride(1), {w[i]}.stride(1), {w[i]}.stride(0), D, 1, BN=BN, {tiles})")
    separate = "\n    ".join(launches)
    if all(biased) or not any(biased):
        # one launch for the three projections when their weights (and biases) share dtype and layout
        kernel, bq, bk, bv = ("_qkv_bias", r["bq"], r["bk"], r["bv"]) if all(biased) else ("_qkv", "a2", "a2", "a2")
        same = f"{w[0]}.stride() == {w[1]}.stride() == {w[2]}.stride() and {w[0]}.dtype == {w[1]}.dtype == {w[2]}.dtype"
        if all(biased):
            same += f" and {bq}.stride() == {bk}.stride() == {bv}.stride() and {bq}.dtype == {bk}.dtype == {bv}.dtype"
        projections = f"""if {same}:
        es, bes = {w[0]}.element_size(), {bq}.element_size()
        BN = {bn(3)}
        grid = (triton.cdiv(M, {p["bm"]}) * triton.cdiv(D, BN), 3)
        _launch[{kernel!r}](grid, a2, {w[0]}, {bq}, qkv, M, D, D, a2.stride(0), a2.stride(1), {w[0]}.stride(1),
                            {w[0]}.stride(0), D, 1, ({w[1]}.data_ptr() - {w[0]}.data_ptr()) // es,
                            ({w[2]}.data_ptr() - {w[0]}.data_ptr()) // es, ({bk}.data_ptr() - {bq}.data_ptr()) // bes,
                            ({bv}.data_ptr() - {bq}.data_ptr()) // bes, M * D, BN=BN, {tiles})
    else:
        BN = {bn(1)}
        grid = (triton.cdiv(M, {p["bm"]}) * triton.cdiv(D, BN),)
        {separate.replace(chr(10), chr(10) + "    ")}"""
    else:
        projections = f"""BN = {bn(1)}
    grid = (triton.cdiv(M, {p["bm"]}) * triton.cdiv(D, BN),)
    {separate}"""
    out_kernel = "_proj_bias" if "bo" in r else "_proj"
    return f"""{TRITON_IMPORTS}{triton_attention_source(attn, p)}{FIT_TILES}
{triton_gemm_kernel("_proj_bias", [BIAS_EPILOGUE])}
{triton_gemm_kernel("_proj", [])}
{triton_gemm_kernel("_qkv_bias", [BIAS_EPILOGUE], three_way=True)}
{triton_gemm_kernel("_qkv", [], three_way=True)}
_launch = {{name: _Launcher(kernel) for name, kernel in
           (("_proj_bias", _proj_bias), ("_proj", _proj), ("_qkv_bias", _qkv_bias), ("_qkv", _qkv))}}


{py_signature(problem)}
    B, N, D = {r["x"]}.shape
    H = {heads}
    M = B * N
    if M == 0 or D == 0:
        return
    a2 = {r["x"]}.reshape(M, D)
    sms = _sms(a2)
    {gdc_line}
    qkv = torch.empty((3, M, D), dtype={r["x"]}.dtype, device={r["x"]}.device)
    {projections}
    o = torch.empty((M, D), dtype={r["x"]}.dtype, device={r["x"]}.device)
    q, k, v = (t.view(B, N, H, D // H) for t in qkv)
    _attention(q, k, v, o.view(B, N, H, D // H))
    c2 = {y}.view(M, D)
    BN = {bn(1)}
    grid = (triton.cdiv(M, {p["bm"]}) * triton.cdiv(D, BN),)
    _launch[{out_kernel!r}](grid, o, {r["wo"]}, {r.get("bo", "o")}, c2, M, D, D, o.stride(0), o.stride(1),
                            {r["wo"]}.stride(1), {r["wo"]}.stride(0), c2.stride(0), c2.stride(1), BN=BN, {tiles})
"""

def render_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    source = _render_launches(problem, b, p)
    return graph_replayed(source) if p.get("graph") else source


FAMILY = Family(
    "mha", match_mha,
    renderers=(
        Renderer("pytorch", False, {}, render_pytorch),
        Renderer(
            "triton", True,
            # first, 6 stages for the projection GEMMs (in-process on the H200: 17.4-17.9 us against 19.8 with 3);
            # then programmatic dependent launch first (judged: 20.1-21.3 us against 20.8-22.1 without)
            ({"bm": (64,), "bn": (64, 128), "bk": (64,), "num_warps": (4,), "stages": (6,), "block_m": (64,),
              "block_n": (64,), "split": ("auto",), "num_stages": (2,), "graph": (True,), "pdl": (True,),
              "fit": (False, True)},
             {"bm": (64, 128), "bn": (128, 64), "bk": (64,), "num_warps": (4,), "stages": (3,),
              "block_m": (64,), "block_n": (64,), "split": ("auto",), "num_stages": (2,), "graph": (True,),
              "pdl": (True, False)}),
            render_triton, accepts=lambda b: b.consts["head_dim"] in TRITON_HEAD_DIMS,
        ),  # fmt: skip
    ),
)

# Notes: the Triton attention kernel's num_warps comes from the same grid key as the GEMMs' (4), its own
# block sizes and stages from block_m/block_n/num_stages. The three input projections are one launch (grid
# axis 1 picks the weight) when the weights share dtype and layout: 3x the CTAs of one 197-token projection,
# which alone fills about a third of an H200's SMs.
