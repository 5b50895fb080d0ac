"""Fused blocks (L2): MLPs, a decoder layer, a DiT block, a UNet resnet block, a ConvNeXt block, Whisper's stem."""

from __future__ import annotations

from typing import Any

from ..draft import ProblemDraft
from .attention import QKV_BIAS_INIT, causal_fragments, qkv_projections
from .common import SHORT, VAR, Rows, const, eps_tag, expr, problem, source, tensor, tolerance, with_init
from .elementwise import GELU

_GATED_MLP = '''
import torch

$ACT
def run(x, w_gate, w_up, w_down):
    g = x @ w_gate.t()
    u = x @ w_up.t()
    h = (act(g.float()) * u.float()).to(x.dtype)
    return h @ w_down.t()
'''

_GELU_MLP = '''
import torch

$ACT
def run(x, w1, b1, w2, b2):
    h = x @ w1.t() + b1
    h = act(h.float()).to(x.dtype)
    return h @ w2.t() + b2
'''

_DECODER_LAYER = '''
import torch
import torch.nn.functional as F

Q_HEADS = $Q_HEADS
KV_HEADS = $KV_HEADS
HEAD_DIM = $HEAD_DIM
THETA = $THETA
EPS = $EPS
$ROPE_HELPER$ATTENTION_HELPER
def rmsnorm(x, weight):
    xf = x.float()
    normed = xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + EPS)
    return weight * normed.to(x.dtype)

def run($ARGS):
    h = x + causal_self_attention(rmsnorm(x, attn_norm), positions, wq, $BQ, wk, $BK, wv, $BV, wo)
    m = rmsnorm(h, mlp_norm)
    g = m @ w_gate.t()
    act = (g.float() * torch.sigmoid(g.float())).to(x.dtype)
    return h + (act * (m @ w_up.t())) @ w_down.t()

def make_inputs(axes, device):
    s, h, qd, kvd, i = axes["S"], axes["H"], axes["QD"], axes["KVD"], axes["I"]

    def weight(rows, cols):
        return (torch.randn(rows, cols, device=device) * cols ** -0.5).to($DTYPE)

    out = {"x": torch.randn(s, h, device=device).to($DTYPE),
           "positions": torch.arange(s, device=device, dtype=torch.int64),
           "attn_norm": (1.0 + 0.1 * torch.randn(h, device=device)).to($DTYPE),
           "wq": weight(qd, h), "wk": weight(kvd, h), "wv": weight(kvd, h), "wo": weight(h, qd),
           "mlp_norm": (1.0 + 0.1 * torch.randn(h, device=device)).to($DTYPE),
           "w_gate": weight(i, h), "w_up": weight(i, h), "w_down": weight(h, i)}
''' + QKV_BIAS_INIT

_DIT_BLOCK = '''
import torch
import torch.nn.functional as F

HEADS = $HEADS
EPS = 1e-6

$ACT
def layernorm(x):
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((xf - mean) * torch.rsqrt(var + EPS)).to(x.dtype)

def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

def run(x, c, w_ada, b_ada, w_qkv, b_qkv, w_proj, b_proj, w_fc1, b_fc1, w_fc2, b_fc2):
    b, n, d = x.shape
    # adaLN: the conditioning vector yields shift, scale and gate for both sub-blocks.
    cs = c.float()
    ada = (cs * torch.sigmoid(cs)).to(c.dtype) @ w_ada.t() + b_ada
    shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = ada.chunk(6, dim=-1)
    h = modulate(layernorm(x), shift_a, scale_a)
    qkv = (h @ w_qkv.t() + b_qkv).view(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
    o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
    o = o.transpose(1, 2).reshape(b, n, d) @ w_proj.t() + b_proj
    x = x + gate_a.unsqueeze(1) * o
    h = modulate(layernorm(x), shift_m, scale_m)
    h = act((h @ w_fc1.t() + b_fc1).float()).to(x.dtype)
    return x + gate_m.unsqueeze(1) * (h @ w_fc2.t() + b_fc2)

def make_inputs(axes, device):
    b, n, d, f = axes["B"], axes["N"], axes["D"], axes["F"]

    def weight(rows, cols):
        return (torch.randn(rows, cols, device=device) * cols ** -0.5).to($DTYPE)

    def bias(size):
        return (torch.randn(size, device=device) * 0.1).to($DTYPE)

    return {"x": torch.randn(b, n, d, device=device).to($DTYPE), "c": torch.randn(b, d, device=device).to($DTYPE),
            "w_ada": weight(6 * d, d), "b_ada": bias(6 * d), "w_qkv": weight(3 * d, d), "b_qkv": bias(3 * d),
            "w_proj": weight(d, d), "b_proj": bias(d), "w_fc1": weight(f, d), "b_fc1": bias(f),
            "w_fc2": weight(d, f), "b_fc2": bias(d)}
'''

_UNET_RESNET = '''
import torch
import torch.nn.functional as F

GROUPS = $GROUPS
EPS = $EPS

def groupnorm_silu(x, weight, bias):
    b, c, h, w = x.shape
    xf = x.float().reshape(b, GROUPS, -1)
    mean = xf.mean(dim=-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)
    y = ((xf - mean) * torch.rsqrt(var + EPS)).reshape(b, c, h, w)
    y = y * weight.float().reshape(1, c, 1, 1) + bias.float().reshape(1, c, 1, 1)
    return (y * torch.sigmoid(y)).to(x.dtype)

def run(x, temb, norm1_w, norm1_b, conv1_w, conv1_b, temb_w, temb_b, norm2_w, norm2_b, conv2_w, conv2_b):
    h = F.conv2d(groupnorm_silu(x, norm1_w, norm1_b), conv1_w, conv1_b, padding=1)
    t = temb.float()
    t = (t * torch.sigmoid(t)).to(temb.dtype) @ temb_w.t() + temb_b
    h = h + t[:, :, None, None]
    h = F.conv2d(groupnorm_silu(h, norm2_w, norm2_b), conv2_w, conv2_b, padding=1)
    return x + h
'''

_CONVNEXT = '''
import torch
import torch.nn.functional as F

EPS = $EPS

$ACT
def run(x, dw_w, dw_b, ln_w, ln_b, w1, b1, w2, b2, gamma):
    c = x.shape[1]
    h = F.conv2d(x, dw_w, dw_b, padding=3, groups=c)  # depthwise 7x7
    h = h.permute(0, 2, 3, 1)  # channels last for the norm and the pointwise MLP
    hf = h.float()
    mean = hf.mean(dim=-1, keepdim=True)
    var = ((hf - mean) ** 2).mean(dim=-1, keepdim=True)
    h = ((hf - mean) * torch.rsqrt(var + EPS) * ln_w.float() + ln_b.float()).to(x.dtype)
    h = act((h @ w1.t() + b1).float()).to(x.dtype)
    h = (h @ w2.t() + b2) * gamma
    return x + h.permute(0, 3, 1, 2)
'''

_WHISPER_STEM = '''
import torch
import torch.nn.functional as F

$ACT
def run(mel, conv1_w, conv1_b, conv2_w, conv2_b, pos_embed):
    h = act(F.conv1d(mel, conv1_w, conv1_b, padding=1).float()).to(mel.dtype)
    h = act(F.conv1d(h, conv2_w, conv2_b, stride=2, padding=1).float()).to(mel.dtype)
    return h.transpose(1, 2) + pos_embed
'''


def _mlp(*, name: str, summary: str, axes: dict[str, dict[str, Any]], inputs: dict[str, dict[str, Any]],
         out_axis: str, template: str, act: str, dtype: str, rows: Rows) -> ProblemDraft:  # fmt: skip
    """An MLP block over ``rows``, weights as inputs: ``y`` is ``[*rows, out_axis]``."""
    return problem(
        name=name, level="L2", op_type="mlp", summary=summary,
        axes={**rows.axis_defs, **axes},
        inputs=inputs,
        outputs={"y": tensor([*rows.names, out_axis], dtype)},
        reference=with_init(source(template, raw={"ACT": GELU[act]}), inputs, dtype),
        sizes=rows.sizes, tol=tolerance(dtype, "block"),
        tags=("mlp", "gemm", "forward"),
    )  # fmt: skip


def gated_mlp(*, hidden: int, intermediate: int, act: str, dtype: str, rows: Rows):
    label = {"silu": "swiglu", "tanh": "geglu_tanh"}[act]
    return _mlp(
        name=f"mlp_{label}_h{hidden}_i{intermediate}{rows.tag}_{SHORT[dtype]}",
        summary=f"Gated MLP block ({label}): down(act(gate(x)) * up(x)), {hidden} -> {intermediate} -> {hidden}, "
        f"{dtype}, weights as inputs.",
        axes={"H": const(hidden), "I": const(intermediate)},
        inputs={"x": tensor([*rows.names, "H"], dtype), "w_gate": tensor(["I", "H"], dtype),
                "w_up": tensor(["I", "H"], dtype), "w_down": tensor(["H", "I"], dtype)},
        out_axis="H", template=_GATED_MLP, act=act, dtype=dtype, rows=rows,
    )  # fmt: skip


def gelu_mlp(*, in_features: int, hidden: int, out_features: int, act: str, dtype: str, rows: Rows):
    return _mlp(
        name=f"mlp_gelu_{act}_k{in_features}_i{hidden}_n{out_features}{rows.tag}_{SHORT[dtype]}",
        summary=f"MLP block: fc2(gelu_{act}(fc1(x))) with biases, {in_features} -> {hidden} -> {out_features}, "
        f"{dtype}, weights as inputs.",
        axes={"K": const(in_features), "I": const(hidden), "NO": const(out_features)},
        inputs={"x": tensor([*rows.names, "K"], dtype), "w1": tensor(["I", "K"], dtype), "b1": tensor(["I"], dtype),
                "w2": tensor(["NO", "I"], dtype), "b2": tensor(["NO"], dtype)},
        out_axis="NO", template=_GELU_MLP, act=act, dtype=dtype, rows=rows,
    )  # fmt: skip


def decoder_layer(*, hidden: int, q_heads: int, kv_heads: int, head_dim: int, intermediate: int, theta: float,
                  eps: float, bias: bool, dtype: str, sizes: tuple[int, ...]):  # fmt: skip
    name = (f"decoder_layer_h{hidden}_q{q_heads}_kv{kv_heads}_d{head_dim}_i{intermediate}_theta{int(theta)}"
            f"_{eps_tag(eps)}{'_qkvbias' if bias else ''}_{SHORT[dtype]}")  # fmt: skip
    inputs = {"x": tensor(["S", "H"], dtype), "positions": tensor(["S"], "int64"), "attn_norm": tensor(["H"], dtype),
              **qkv_projections(dtype, bias), "wo": tensor(["H", "QD"], dtype), "mlp_norm": tensor(["H"], dtype),
              "w_gate": tensor(["I", "H"], dtype), "w_up": tensor(["I", "H"], dtype), "w_down": tensor(["H", "I"], dtype)}
    return problem(
        name=name, level="L2", op_type="decoder_layer",
        summary=f"A whole pre-norm decoder layer for one prefill sequence: RMSNorm (eps {eps}), causal GQA "
        f"attention ({q_heads} query / {kv_heads} KV heads of {head_dim}, rotary theta {theta:g}"
        f"{', q/k/v bias' if bias else ''}), residual, RMSNorm, SwiGLU MLP {hidden} -> {intermediate}, residual; "
        f"{dtype}, weights as inputs.",
        axes={"S": VAR, "H": const(hidden), "QD": const(q_heads * head_dim), "KVD": const(kv_heads * head_dim),
              "I": const(intermediate)},
        inputs=inputs,
        outputs={"y": tensor(["S", "H"], dtype)},
        reference=source(
            _DECODER_LAYER,
            raw=causal_fragments(inputs, bias, dtype),
            Q_HEADS=q_heads, KV_HEADS=kv_heads, HEAD_DIM=head_dim, THETA=float(theta), EPS=eps, BIAS=bias,
        ),
        sizes=({"S": s} for s in sizes), tol=tolerance(dtype, "block"),
        tags=("decoder", "attention", "mlp", "forward"),
    )  # fmt: skip


def _batched(*, name: str, op_type: str, summary: str, axes: dict[str, dict[str, Any]],
             inputs: dict[str, dict[str, Any]], out: list[str], reference: str, tags: tuple[str, ...], dtype: str,
             batches: tuple[int, ...]) -> ProblemDraft:  # fmt: skip
    """A block over a batch ``B`` (a workload per entry of ``batches``) whose output ``y`` is ``out``."""
    return problem(
        name=name, level="L2", op_type=op_type, summary=summary,
        axes={"B": VAR, **axes},
        inputs=inputs,
        outputs={"y": tensor(out, dtype)},
        reference=reference,
        sizes=({"B": b} for b in batches), tol=tolerance(dtype, "block"),
        tags=tags,
    )  # fmt: skip


def dit_block(*, hidden: int, heads: int, mlp_hidden: int, tokens: int, act: str, dtype: str,
              batches: tuple[int, ...]):  # fmt: skip
    d, f = ["D"], ["F"]
    inputs = {"x": tensor(["B", "N", "D"], dtype), "c": tensor(["B", "D"], dtype),
              "w_ada": tensor(["D6", "D"], dtype), "b_ada": tensor(["D6"], dtype),
              "w_qkv": tensor(["D3", "D"], dtype), "b_qkv": tensor(["D3"], dtype),
              "w_proj": tensor(["D", "D"], dtype), "b_proj": tensor(d, dtype),
              "w_fc1": tensor(["F", "D"], dtype), "b_fc1": tensor(f, dtype),
              "w_fc2": tensor(["D", "F"], dtype), "b_fc2": tensor(d, dtype)}
    return _batched(
        name=f"dit_block_h{hidden}_heads{heads}_f{mlp_hidden}_n{tokens}_{SHORT[dtype]}", op_type="dit_block",
        summary=f"DiT block with adaLN modulation: SiLU + linear on the conditioning vector gives shift/scale/gate "
        f"for attention ({heads} heads, {tokens} tokens of {hidden}) and for the gelu_{act} MLP ({mlp_hidden}), "
        f"LayerNorm without affine (eps 1e-6), gated residuals; {dtype}, weights as inputs.",
        axes={"N": const(tokens), "D": const(hidden), "F": const(mlp_hidden), "D3": expr("3 * D"),
              "D6": expr("6 * D")},
        inputs=inputs, out=["B", "N", "D"],
        reference=source(_DIT_BLOCK, raw={"ACT": GELU[act], "DTYPE": f"torch.{dtype}"}, HEADS=heads),
        tags=("dit", "attention", "mlp", "forward"), dtype=dtype, batches=batches,
    )  # fmt: skip


def unet_resnet_block(*, channels: int, spatial: int, temb_dim: int, groups: int, eps: float, dtype: str,
                      batches: tuple[int, ...]):  # fmt: skip
    c, x = ["C"], ["B", "C", "S", "S"]
    inputs = {"x": tensor(x, dtype), "temb": tensor(["B", "TD"], dtype),
              "norm1_w": tensor(c, dtype), "norm1_b": tensor(c, dtype),
              "conv1_w": tensor(["C", "C", "3", "3"], dtype), "conv1_b": tensor(c, dtype),
              "temb_w": tensor(["C", "TD"], dtype), "temb_b": tensor(c, dtype),
              "norm2_w": tensor(c, dtype), "norm2_b": tensor(c, dtype),
              "conv2_w": tensor(["C", "C", "3", "3"], dtype), "conv2_b": tensor(c, dtype)}
    return _batched(
        name=f"unet_resnet_block_c{channels}_s{spatial}_t{temb_dim}_g{groups}_{SHORT[dtype]}", op_type="resnet_block",
        summary=f"UNet resnet block at {channels} channels, {spatial}x{spatial}: GroupNorm({groups}) + SiLU, 3x3 "
        f"conv, plus the projected timestep embedding ({temb_dim}), GroupNorm + SiLU, 3x3 conv, residual; {dtype}.",
        axes={"C": const(channels), "S": const(spatial), "TD": const(temb_dim)},
        inputs=inputs, out=x,
        reference=with_init(source(_UNET_RESNET, GROUPS=groups, EPS=eps), inputs, dtype),
        tags=("conv", "groupnorm", "forward"), dtype=dtype, batches=batches,
    )  # fmt: skip


def convnext_block(*, channels: int, spatial: int, eps: float, dtype: str, batches: tuple[int, ...]):
    c = ["C"]
    inputs = {"x": tensor(["B", "C", "S", "S"], dtype), "dw_w": tensor(["C", "1", "7", "7"], dtype),
              "dw_b": tensor(c, dtype), "ln_w": tensor(c, dtype), "ln_b": tensor(c, dtype),
              "w1": tensor(["C4", "C"], dtype), "b1": tensor(["C4"], dtype), "w2": tensor(["C", "C4"], dtype),
              "b2": tensor(c, dtype), "gamma": tensor(c, dtype)}
    return _batched(
        name=f"convnext_block_c{channels}_s{spatial}_{SHORT[dtype]}", op_type="convnext_block",
        summary=f"ConvNeXt block at {channels} channels, {spatial}x{spatial}: depthwise 7x7 conv, channels-last "
        f"LayerNorm (eps {eps}), pointwise MLP {channels} -> {4 * channels} -> {channels} with exact GELU, layer "
        f"scale, residual; {dtype}.",
        axes={"C": const(channels), "S": const(spatial), "C4": expr("4 * C")},
        inputs=inputs, out=["B", "C", "S", "S"],
        reference=with_init(source(_CONVNEXT, raw={"ACT": GELU["exact"]}, EPS=eps), inputs, dtype),
        tags=("conv", "mlp", "forward"), dtype=dtype, batches=batches,
    )  # fmt: skip


def whisper_conv_stem(*, mel_bins: int, frames: int, hidden: int, dtype: str, batches: tuple[int, ...]):
    inputs = {"mel": tensor(["B", "M", "FR"], dtype), "conv1_w": tensor(["H", "M", "3"], dtype),
              "conv1_b": tensor(["H"], dtype), "conv2_w": tensor(["H", "H", "3"], dtype),
              "conv2_b": tensor(["H"], dtype), "pos_embed": tensor(["FO", "H"], dtype)}
    return _batched(
        name=f"conv1d_stem_m{mel_bins}_f{frames}_h{hidden}_{SHORT[dtype]}", op_type="conv_stem",
        summary=f"Audio encoder stem: conv1d {mel_bins} -> {hidden} (k3), GELU, conv1d {hidden} -> {hidden} (k3, "
        f"stride 2), GELU, to time-major plus positional embedding, over {frames} mel frames; {dtype}.",
        axes={"M": const(mel_bins), "FR": const(frames), "H": const(hidden), "FO": expr("FR // 2")},
        inputs=inputs, out=["B", "FO", "H"],
        reference=with_init(source(_WHISPER_STEM, raw={"ACT": GELU["exact"]}), inputs, dtype),
        tags=("conv", "forward"), dtype=dtype, batches=batches,
    )  # fmt: skip
