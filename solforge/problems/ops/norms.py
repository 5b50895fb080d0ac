"""Normalisation problems: RMSNorm (forward, backward), LayerNorm, GroupNorm + SiLU."""

from __future__ import annotations

from .common import SHORT, Rows, const, eps_tag, problem, source, tensor, tolerance

_RMS_FWD = '''
import torch

def run(x, weight, eps):
    # Statistics in float32, as the model computes them.
    xf = x.float()
    mean_sq = (xf * xf).mean(dim=-1, keepdim=True)
    normed = xf * torch.rsqrt(mean_sq + eps)
    if $UNIT_OFFSET:
        # Gemma stores the scale as an offset from one and multiplies in float32.
        return (normed * (1.0 + weight.float())).to(x.dtype)
    # Llama / Qwen / Mistral round the normalised value to the model dtype, then scale.
    return weight * normed.to(x.dtype)
'''

_RMS_BWD = '''
import torch

def run(x, weight, grad_out, eps):
    xf = x.float()
    g = grad_out.float()
    w = weight.float() + (1.0 if $UNIT_OFFSET else 0.0)
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    xhat = xf * rstd
    # d/dw: sum over every row of grad * normalised input.
    grad_weight = (g * xhat).reshape(-1, xf.shape[-1]).sum(dim=0)
    # d/dx: project the scaled gradient off the normalised direction.
    gw = g * w
    dot = (gw * xhat).mean(dim=-1, keepdim=True)
    grad_x = rstd * (gw - xhat * dot)
    return grad_x.to(x.dtype), grad_weight.to(weight.dtype)
'''

_LAYERNORM = '''
import torch

def run($ARGS):
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    centered = xf - mean
    var = (centered * centered).mean(dim=-1, keepdim=True)
    y = centered * torch.rsqrt(var + eps)
    if $AFFINE:
        y = y * weight.float() + bias.float()
    return y.to(x.dtype)
'''

_GROUPNORM_SILU = '''
import torch

GROUPS = $GROUPS

def run(x, weight, bias, eps):
    b, c, h, w = x.shape
    xf = x.float().reshape(b, GROUPS, -1)
    mean = xf.mean(dim=-1, keepdim=True)
    centered = xf - mean
    var = (centered * centered).mean(dim=-1, keepdim=True)
    y = (centered * torch.rsqrt(var + eps)).reshape(b, c, h, w)
    y = y * weight.float().reshape(1, c, 1, 1) + bias.float().reshape(1, c, 1, 1)
    # SiLU follows every GroupNorm in the UNet's resnet blocks.
    y = y * torch.sigmoid(y)
    return y.to(x.dtype)
'''


def rmsnorm(*, hidden: int, eps: float, dtype: str, rows: Rows, unit_offset: bool = False, backward: bool = False):
    """RMSNorm forward, or its backward: the gradients of input and weight a training step needs."""
    kind = "rmsnorm_unit_offset" if unit_offset else "rmsnorm"
    shape = [*rows.names, "H"]
    inputs = {"x": tensor(shape, dtype), "weight": tensor(["H"], dtype)}
    if backward:
        inputs["grad_out"] = tensor(shape, dtype)
        outputs = {"grad_x": tensor(shape, dtype), "grad_weight": tensor(["H"], dtype)}
        direction, offset, purpose = "backward (gradients of input and weight)", "", ", as a training step needs it"
    else:
        outputs = {"y": tensor(shape, dtype)}
        direction, offset, purpose = "forward", "weight stored as 1 + w, " if unit_offset else "", ""
    inputs["eps"] = tensor(None, "float32")
    return problem(
        name=f"{kind}_{'bwd' if backward else 'fwd'}_h{hidden}_{eps_tag(eps)}{rows.tag}_{SHORT[dtype]}", level="L1",
        op_type="rmsnorm_backward" if backward else "rmsnorm",
        summary=f"RMSNorm {direction} over a hidden size of {hidden} ({offset}eps {eps}, {dtype}){purpose}.",
        axes={**rows.axis_defs, "H": const(hidden)},
        inputs=inputs,
        outputs=outputs,
        reference=source(_RMS_BWD if backward else _RMS_FWD, UNIT_OFFSET=unit_offset),
        # the weight's gradient sums over every row: accumulation-order differences, as in a GEMM
        sizes=rows.sizes, tol=tolerance(dtype, "gemm" if backward else "elementwise"), scalars={"eps": eps},
        tags=("norm", "backward" if backward else "forward"),
    )  # fmt: skip


def layernorm_fwd(*, hidden: int, eps: float, dtype: str, rows: Rows, affine: bool = True):
    name = f"layernorm{'' if affine else '_noaffine'}_fwd_h{hidden}_{eps_tag(eps)}{rows.tag}_{SHORT[dtype]}"
    shape = [*rows.names, "H"]
    inputs = {"x": tensor(shape, dtype)}
    if affine:
        inputs |= {"weight": tensor(["H"], dtype), "bias": tensor(["H"], dtype)}
    inputs["eps"] = tensor(None, "float32")
    return problem(
        name=name, level="L1", op_type="layernorm",
        summary=f"LayerNorm forward over {hidden} features ({'with' if affine else 'without'} affine, eps {eps}, "
        f"{dtype}).",
        axes={**rows.axis_defs, "H": const(hidden)},
        inputs=inputs,
        outputs={"y": tensor(shape, dtype)},
        reference=source(_LAYERNORM, raw={"ARGS": ", ".join(inputs)}, AFFINE=affine),
        sizes=rows.sizes, tol=tolerance(dtype, "elementwise"), scalars={"eps": eps},
        tags=("norm", "forward"),
    )  # fmt: skip


def groupnorm_silu(*, channels: int, groups: int, spatial: int, eps: float, dtype: str, batches: tuple[int, ...]):
    name = f"groupnorm_silu_c{channels}_g{groups}_s{spatial}_{eps_tag(eps)}_{SHORT[dtype]}"
    shape = ["B", "C", "S", "S"]
    return problem(
        name=name, level="L1", op_type="groupnorm",
        summary=f"GroupNorm ({groups} groups over {channels} channels, {spatial}x{spatial}, eps {eps}) followed by "
        f"SiLU, {dtype}.",
        axes={"B": {"type": "var"}, "C": const(channels), "S": const(spatial)},
        inputs={"x": tensor(shape, dtype), "weight": tensor(["C"], dtype), "bias": tensor(["C"], dtype),
                "eps": tensor(None, "float32")},
        outputs={"y": tensor(shape, dtype)},
        reference=source(_GROUPNORM_SILU, GROUPS=groups),
        sizes=({"B": b} for b in batches), tol=tolerance(dtype, "elementwise"), scalars={"eps": eps},
        tags=("norm", "forward"),
    )  # fmt: skip
