"""Element-wise and row-wise problems: gated activations (forward, backward), GELU, softmax, rotary embedding."""

from __future__ import annotations

from ..draft import ProblemDraft
from .common import SHORT, Rows, const, problem, source, tensor, tolerance

# One GELU definition per variant, shared by every template that applies an activation to a float32 tensor.
GELU = {
    "exact": "def act(v):\n    return 0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))\n",
    "tanh": "def act(v):\n    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)\n    return 0.5 * v * (1.0 + torch.tanh(inner))\n",
    "quick": "def act(v):\n    return v * torch.sigmoid(1.702 * v)\n",
    "silu": "def act(v):\n    return v * torch.sigmoid(v)\n",
}

_GATED_FWD = '''
import torch

$ACT
def run(gate, up):
    # Activation in float32, one rounding to the model dtype at the end.
    return (act(gate.float()) * up.float()).to(gate.dtype)
'''

_SWIGLU_BWD = '''
import torch

def run(gate, up, grad_out):
    g = gate.float()
    s = torch.sigmoid(g)
    silu = g * s
    dsilu = s * (1.0 + g * (1.0 - s))
    go = grad_out.float()
    grad_gate = go * up.float() * dsilu
    grad_up = go * silu
    return grad_gate.to(gate.dtype), grad_up.to(up.dtype)
'''

_ACT = '''
import torch

$ACT
def run(x):
    return act(x.float()).to(x.dtype)
'''

_SOFTMAX = '''
import torch

def run(logits):
    x = logits.float()
    shifted = x - x.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    return (e / e.sum(dim=-1, keepdim=True)).to(logits.dtype)
'''

_ROPE = '''
import torch

THETA = $THETA
MAX_POSITION = $MAX_POSITION

def rotate(x, cos, sin):
    # Rotate-half layout: the first half of each head pairs with the second half.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin

def run(q, k, positions):
    d = q.shape[-1]
    inv_freq = 1.0 / (THETA ** (torch.arange(0, d, 2, dtype=torch.float32, device=q.device) / d))
    angles = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos = emb.cos()[:, None, :]
    sin = emb.sin()[:, None, :]
    return rotate(q.float(), cos, sin).to(q.dtype), rotate(k.float(), cos, sin).to(k.dtype)

def make_inputs(axes, device):
    t = axes["T"]
    # A contiguous run of positions starting anywhere in the context window (prefill or decode step).
    start = torch.randint(0, max(MAX_POSITION - t, 0) + 1, (1,), device=device, dtype=torch.int64)
    return {
        "q": torch.randn(t, axes["HQ"], axes["D"], device=device).to($DTYPE),
        "k": torch.randn(t, axes["HKV"], axes["D"], device=device).to($DTYPE),
        "positions": start + torch.arange(t, device=device, dtype=torch.int64),
    }
'''


def _rowwise(*, name: str, op_type: str, summary: str, axis: str, size: int, inputs: tuple[str, ...],
             outputs: tuple[str, ...], reference: str, tags: tuple[str, ...], dtype: str, rows: Rows,
             tol: dict[str, float] | None = None) -> ProblemDraft:  # fmt: skip
    """An element-wise problem over ``rows``: ``inputs`` and ``outputs`` name its tensors, each ``[*rows, axis]``."""
    shape = [*rows.names, axis]
    return problem(
        name=name, level="L1", op_type=op_type, summary=summary,
        axes={**rows.axis_defs, axis: const(size)},
        inputs={n: tensor(shape, dtype) for n in inputs},
        outputs={n: tensor(shape, dtype) for n in outputs},
        reference=reference,
        sizes=rows.sizes, tol=tol or tolerance(dtype, "elementwise"),
        tags=tags,
    )  # fmt: skip


def gated_fwd(*, intermediate: int, act: str, dtype: str, rows: Rows):
    label = {"silu": "swiglu", "tanh": "geglu_tanh", "exact": "geglu"}[act]
    return _rowwise(
        name=f"{label}_fwd_i{intermediate}{rows.tag}_{SHORT[dtype]}", op_type=label,
        summary=f"Gated activation {label}: act(gate) * up over an intermediate size of {intermediate}, {dtype}.",
        axis="I", size=intermediate, inputs=("gate", "up"), outputs=("y",),
        reference=source(_GATED_FWD, raw={"ACT": GELU[act]}), tags=("activation", "forward"), dtype=dtype, rows=rows,
    )  # fmt: skip


def swiglu_bwd(*, intermediate: int, dtype: str, rows: Rows):
    return _rowwise(
        name=f"swiglu_bwd_i{intermediate}{rows.tag}_{SHORT[dtype]}", op_type="swiglu_backward",
        summary=f"SwiGLU backward: gradients of gate and up for silu(gate) * up, intermediate size {intermediate}, "
        f"{dtype}.",
        axis="I", size=intermediate, inputs=("gate", "up", "grad_out"), outputs=("grad_gate", "grad_up"),
        reference=_SWIGLU_BWD.lstrip("\n"), tags=("activation", "backward"), dtype=dtype, rows=rows,
    )  # fmt: skip


def activation(*, features: int, act: str, dtype: str, rows: Rows):
    return _rowwise(
        name=f"gelu_{act}_f{features}{rows.tag}_{SHORT[dtype]}", op_type="gelu",
        summary=f"GELU ({act} form) over {features} features, {dtype}.",
        axis="F", size=features, inputs=("x",), outputs=("y",),
        reference=source(_ACT, raw={"ACT": GELU[act]}), tags=("activation", "forward"), dtype=dtype, rows=rows,
    )  # fmt: skip


def softmax(*, features: int, dtype: str, rows: Rows, what: str = "vocabulary"):
    return _rowwise(
        name=f"softmax_v{features}{rows.tag}_{SHORT[dtype]}", op_type="softmax",
        summary=f"Softmax over a {what} of {features} entries, {dtype}.",
        axis="V", size=features, inputs=("logits",), outputs=("probs",),
        reference=_SOFTMAX.lstrip("\n"), tags=("softmax", "forward"), dtype=dtype, rows=rows,
        tol={"max_atol": 1e-7, "max_rtol": 1e-3} if dtype == "float32" else None,
    )  # fmt: skip


def rope_problem(*, name: str, summary: str, reference: str, q_heads: int, kv_heads: int, head_dim: int, dtype: str,
                 rows: Rows) -> ProblemDraft:  # fmt: skip
    """A rotary-embedding problem: q [T, HQ, D] and k [T, HKV, D] rotated by their ``positions`` [T]."""
    return problem(
        name=name, level="L1", op_type="rope", summary=summary,
        axes={**rows.axis_defs, "HQ": const(q_heads), "HKV": const(kv_heads), "D": const(head_dim)},
        inputs={"q": tensor(["T", "HQ", "D"], dtype), "k": tensor(["T", "HKV", "D"], dtype),
                "positions": tensor(["T"], "int64")},
        outputs={"q_out": tensor(["T", "HQ", "D"], dtype), "k_out": tensor(["T", "HKV", "D"], dtype)},
        reference=reference,
        sizes=rows.sizes, tol=tolerance(dtype, "elementwise"),
        tags=("rope", "forward"),
    )  # fmt: skip


def rope(*, q_heads: int, kv_heads: int, head_dim: int, theta: float, max_position: int, dtype: str, rows: Rows):
    return rope_problem(
        name=f"rope_q{q_heads}_kv{kv_heads}_d{head_dim}_theta{int(theta)}_{SHORT[dtype]}",
        summary=f"Rotary position embedding (rotate-half layout, theta {theta:g}) applied to {q_heads} query and "
        f"{kv_heads} key heads of size {head_dim}, {dtype}. Positions are a contiguous run inside a "
        f"{max_position}-token window.",
        reference=source(_ROPE, raw={"DTYPE": f"torch.{dtype}"}, THETA=float(theta), MAX_POSITION=max_position),
        q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype, rows=rows,
    )  # fmt: skip
