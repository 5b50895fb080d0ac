"""Rotary position embedding (RoPE) of one or two head tensors (q, k) at integer positions.

y = x * cos(pos * inv_freq) + rotate(x) * sin(pos * inv_freq), inv_freq_i = 1 / theta^(2i / D) (fp32), with
``style`` ``half`` (rotate-half: element i pairs with i + D/2, as HF Llama/Mistral) or ``interleaved``
(element 2i pairs with 2i + 1, as GPT-J / the complex-number spelling).
Reference shape: ops {cos and sin (or polar), mul, add|sub, neg, cat|stack, arange, pow, reciprocal|div, casts, views};
one integer positions input shaped like the leading dims of each head tensor ([T] for [T, H, D]); one or two
float head tensors [..., H, D], each with an output of its shape and dtype (same D). Theta: a float scalar
input, or a number in the reference (``THETA = 10000.0``, a literal base of ``**``, ...): every candidate
value × style is a binding and the probe keeps the one that reproduces the reference (the first, if several).
Kernel (CUDA): one CTA per token: its D/2 cos/sin computed once into shared memory (fp32, as the reference:
powf, a correctly rounded reciprocal, full-precision sincosf: angles reach ~1e5 rad), then every pair chunk
of every q and k head of that token rotated with 16-byte loads; one launch for q and k. Launcher: grid = T;
``threads`` "cover" sizes the CTA to one chunk a thread (up to 1024), so every load is issued before the barrier.
Triton: one program per token, cos/sin once, heads in blocks of BLOCK_H; inv_freq from the reference's own
torch expression, cached per (device, D). Notes at the bottom.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Mapping

from sol_bench.problem import Problem

from ..graph import OpSignature
from .base import (CUDA_FILE, Binding, Family, Renderer, cuda_module, kernel_source, py_signature,
                   triton_launcher)

_ALLOWED = {
    "cos", "sin", "mul", "add", "sub", "rsub", "neg", "div", "reciprocal", "pow", "exp", "log", "arange", "cat",
    "stack", "_to_copy", "to", "clone", "alias", "detach", "contiguous", "copy", "copy_", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "narrow",
    "split", "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "transpose", "permute", "t", "repeat",
    "repeat_interleave", "index", "index_select", "embedding", "outer", "view_as_complex", "view_as_real",
    "polar", "complex", "lift_fresh", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
    "fill", "fill_", "scalar_tensor", "type_as",
}  # fmt: skip
_INT_DTYPES = {"int64", "int32"}
_FLOAT_DTYPES = {"float32", "float16", "bfloat16"}
STYLES = ("half", "interleaved")
MAX_THETAS = 8
_THETA_NAME = re.compile(r"theta|base|rope|freq", re.I)


# --------------------------------------------------------------------------------------------- matching


def theta_literals(reference: str) -> list[float]:
    """Numbers in the reference that could be theta (> 1), the likeliest first: values assigned to a name
    like THETA/base, then bases of ``**``/pow, then every other number in source order."""
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return []

    def number(node: ast.AST) -> float | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        return None

    named: dict[str, float] = {}
    first: list[float] = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets = [node.target] if isinstance(node, ast.AnnAssign) else targets
        value = getattr(node, "value", None)
        for t in targets:
            if isinstance(t, ast.Name) and value is not None and (v := number(value)) is not None:
                named[t.id] = v
                if _THETA_NAME.search(t.id):
                    first.append(v)
    bases: list[float] = []
    for node in ast.walk(tree):
        base = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base = node.left
        elif isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", getattr(node.func, "id", "")) == "pow":
            base = node.args[0]
        if base is not None:
            v = number(base) if not isinstance(base, ast.Name) else named.get(base.id)
            if v is not None:
                bases.append(v)
    rest = [v for node in ast.walk(tree) if (v := number(node)) is not None]
    out = list(dict.fromkeys(v for v in [*first, *bases, *rest] if v > 1.0))
    return out[:MAX_THETAS]


def _head_assignments(problem: Problem, pos: str) -> list[list[tuple[str, str]]]:
    """(input, output) pairs for every way of giving each output an input of its shape and dtype."""
    d = problem.definition
    pos_shape = d.inputs[pos].shape
    heads = [n for n, s in d.inputs.items() if not s.is_scalar and n != pos]
    outs = list(d.outputs)
    if not 1 <= len(outs) <= 2 or len(heads) != len(outs):
        return []
    for n in heads:
        s = d.inputs[n]
        if s.dtype not in _FLOAT_DTYPES or not s.shape or len(s.shape) < 2 or s.shape[:-2] != pos_shape:
            return []
    if len({d.inputs[n].shape[-1] for n in heads}) != 1:
        return []  # one head dim (one inv_freq) for all
    found: list[list[tuple[str, str]]] = []

    def assign(i: int, used: tuple[str, ...]) -> None:
        if i == len(outs):
            found.append(list(zip(used, outs)))
            return
        o = d.outputs[outs[i]]
        for n in heads:
            if n not in used and d.inputs[n].shape == o.shape and d.inputs[n].dtype == o.dtype:
                assign(i + 1, (*used, n))

    assign(0, ())
    return found


def match(problem: Problem, sig: OpSignature) -> list[Binding]:
    if not ((sig.has("cos", "sin") or sig.has("polar")) and sig.only(_ALLOWED)):
        return []
    d = problem.definition
    ints = [n for n, s in d.inputs.items() if not s.is_scalar and s.dtype in _INT_DTYPES]
    scalars = [n for n, s in d.inputs.items() if s.is_scalar]
    if len(ints) != 1 or not d.inputs[ints[0]].shape or len(scalars) > 1:
        return []
    pos = ints[0]
    thetas: list[tuple[dict[str, str], dict[str, Any]]] = []
    if scalars:
        if d.inputs[scalars[0]].dtype not in ("float32", "float64"):
            return []
        thetas = [({"theta": scalars[0]}, {})]
    else:
        thetas = [({}, {"theta": v}) for v in theta_literals(d.reference)]
    out = []
    for pairs in _head_assignments(problem, pos):
        roles = {"pos": pos}
        for role, (x, y) in zip(("q", "k"), pairs):
            roles[role], roles[f"{role}_out"] = x, y
        for style in STYLES:
            for theta_roles, consts in thetas:
                out.append(Binding({**roles, **theta_roles}, {**consts, "style": style}))
    return out


def _first(bindings: list[Binding]) -> list[Binding]:
    """Candidates are ordered likeliest first; several pass only where the probe cannot tell them apart."""
    return bindings[:1]


def _theta(b: Binding) -> str:
    return b.roles.get("theta") or repr(float(b.consts["theta"]))


def _heads(b: Binding) -> list[tuple[str, str]]:
    return [(b.roles[r], b.roles[f"{r}_out"]) for r in ("q", "k") if r in b.roles]


# ---------------------------------------------------------------------------------------------- pytorch


def render_pytorch(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    q, pos = b.roles["q"], b.roles["pos"]
    if b.consts["style"] == "half":
        rotate = """    h = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :h], xf[..., h:]
    y[..., :h] = x1 * cos - x2 * sin
    y[..., h:] = x2 * cos + x1 * sin"""
    else:
        rotate = """    xf = x.float().unflatten(-1, (-1, 2))
    x1, x2 = xf[..., 0], xf[..., 1]
    y.copy_(torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2))"""
    calls = "\n".join(f"    _rope_rotate({x}, {y}, cos, sin)" for x, y in _heads(b))
    return f"""import torch


def _rope_rotate(x, y, cos, sin):
{rotate}


{py_signature(problem)}
    d = {q}.shape[-1]
    inv_freq = 1.0 / ({_theta(b)} ** (torch.arange(0, d, 2, dtype=torch.float32, device={q}.device) / d))
    angles = {pos}.float()[..., None, None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
{calls}
"""


# ----------------------------------------------------------------------------------------------- triton


def render_triton(problem: Problem, b: Binding, p: Mapping[str, Any]) -> str:
    heads = _heads(b)
    q, qo = heads[0]
    k, ko = heads[1] if len(heads) > 1 else heads[0]
    hkv = f"{k}.numel() // max(tokens * d, 1)" if len(heads) > 1 else "0"
    theta = _theta(b)
    key = f"({q}.device, d)" if "theta" in b.consts else f"({q}.device, d, float({theta}))"
    return f"""import torch
import triton
import triton.language as tl


@triton.jit
def _rope_heads(x_ptr, y_ptr, t, H, D, HALF, c, s, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
                INTERLEAVED: tl.constexpr):
    pairs = tl.arange(0, BLOCK_P)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        m = (h < H)[:, None] & (pairs < HALF)[None, :]
        row = (t * H + h.to(tl.int64)) * D
        if INTERLEAVED:
            i1 = row[:, None] + 2 * pairs[None, :]
            i2 = i1 + 1
        else:
            i1 = row[:, None] + pairs[None, :]
            i2 = i1 + HALF
        x1 = tl.load(x_ptr + i1, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(x_ptr + i2, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + i1, (x1 * c - x2 * s).to(y_ptr.dtype.element_ty), mask=m)
        tl.store(y_ptr + i2, (x2 * c + x1 * s).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rope(q_ptr, k_ptr, qo_ptr, ko_ptr, pos_ptr, inv_ptr, HQ, HKV, D, HALF, BLOCK_H: tl.constexpr,
          BLOCK_P: tl.constexpr, INTERLEAVED: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    pairs = tl.arange(0, BLOCK_P)
    inv = tl.load(inv_ptr + pairs, mask=pairs < HALF, other=0.0)
    angle = tl.load(pos_ptr + t).to(tl.float32) * inv
    c = tl.cos(angle)[None, :]
    s = tl.sin(angle)[None, :]
    _rope_heads(q_ptr, qo_ptr, t, HQ, D, HALF, c, s, BLOCK_H, BLOCK_P, INTERLEAVED)
    _rope_heads(k_ptr, ko_ptr, t, HKV, D, HALF, c, s, BLOCK_H, BLOCK_P, INTERLEAVED)

{triton_launcher()}
_rope_launch = _Launcher(_rope)
_inv_freq = {{}}  # (device, head dim[, theta]) -> the reference's inv_freq, computed there once


{py_signature(problem)}
    d = {q}.shape[-1]
    tokens = {b.roles["pos"]}.numel()
    if tokens == 0 or d == 0:
        return
    inv = _inv_freq.get({key})
    if inv is None:
        inv = _inv_freq[{key}] = 1.0 / ({theta} ** (torch.arange(0, d, 2, dtype=torch.float32, device={q}.device) / d))
    _rope_launch((tokens,), {q}, {k}, {qo}, {ko}, {b.roles["pos"]}, inv, {q}.numel() // (tokens * d), {hkv}, d, d // 2,
                 BLOCK_H={p["block_h"]}, BLOCK_P=triton.next_power_of_2(d // 2),
                 INTERLEAVED={b.consts["style"] == "interleaved"}, num_warps={p["num_warps"]})
"""


# ------------------------------------------------------------------------------------------------- cuda

# The kernel (device code only: the tests also build it for the host, one thread per CTA, to check its logic).
CUDA_KERNEL = kernel_source("rope.cu")

_CUDA_HOST = kernel_source("rope_host.cu")


def render_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> dict[str, str]:
    heads = _heads(b)
    q, qo = heads[0]
    k, ko = heads[1] if len(heads) > 1 else heads[0]
    pos = b.roles["pos"]
    inter = "true" if b.consts["style"] == "interleaved" else "false"
    hkv = f"(int)({k}.numel() / (tokens * d))" if len(heads) > 1 else "0"
    checks = " && ".join(f"{n}.is_contiguous()" for n in dict.fromkeys([q, k, qo, ko, pos]))
    threads = 0 if p["threads"] == "cover" else int(p["threads"])  # 0: the launcher covers the token's chunks
    body = f"""  const long long d = {q}.size(-1);
  const long long tokens = {pos}.numel();
  if (tokens == 0 || d == 0) return;
  TORCH_CHECK(d % 2 == 0 && d / 2 <= ROPE_MAX_HALF, "rope template: head dim ", d, " not even or above ", 2 * ROPE_MAX_HALF);
  TORCH_CHECK({checks}, "rope template: contiguous tensors only");
  TORCH_CHECK({k}.scalar_type() == {q}.scalar_type() && {ko}.scalar_type() == {q}.scalar_type() &&
              {qo}.scalar_type() == {q}.scalar_type(), "rope template: q, k and outputs of one dtype");
  const int hq = (int)({q}.numel() / (tokens * d));
  const int hkv = {hkv};
  const float theta = (float){_theta(b)};
  DISPATCH_FLOAT({q}.scalar_type(), scalar_t, {{
    if ({pos}.scalar_type() == at::kLong)
      launch_rope<scalar_t, int64_t, {inter}>({q}, {k}, {qo}, {ko}, {pos}, tokens, hq, hkv, (int)d, theta, {threads});
    else if ({pos}.scalar_type() == at::kInt)
      launch_rope<scalar_t, int32_t, {inter}>({q}, {k}, {qo}, {ko}, {pos}, tokens, hq, hkv, (int)d, theta, {threads});
    else
      TORCH_CHECK(false, "rope template: positions must be int64 or int32");
  }});"""
    return cuda_module(problem, CUDA_KERNEL + _CUDA_HOST, body)


ROPE = Family(
    "rope", match,
    prune=_first,
    renderers=(
        Renderer("pytorch", False, {}, render_pytorch),
        Renderer("triton", True, {"block_h": (4, 8), "num_warps": (4, 2)}, render_triton),
        Renderer("cuda_cpp", True, {"threads": ("cover", 128, 256)}, render_cuda, file=CUDA_FILE),
    ),
)

# Notes: memory-bound (read q and k once, write them once; positions and cos/sin are noise), so the target is
# bytes(q + k) * 2 / bandwidth. Per pair the CUDA kernel reproduces the reference's fp32 arithmetic operation
# by operation (the reference on the GPU multiplies by 1/D for "/ d" and calls powf, cosf, sinf), so its
# output should match bit for bit up to sincosf vs separate cosf/sinf. Angles this large make cos/sin
# sensitive to one ulp of inv_freq (pos 3e4 × 6e-8 ≈ 2e-3 rad), hence no approximate math anywhere. The
# probe cannot tell styles or thetas apart when every probed position is 0; then the likeliest (the first:
# rotate-half, a THETA-named number) is kept.
