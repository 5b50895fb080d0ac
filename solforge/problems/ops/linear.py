"""Matmul-shaped problems: projections, fp8 block-scaled GEMM, embedding gather, patch embedding."""

from __future__ import annotations

from typing import Any

from .common import SHORT, VAR, Rows, const, expr, problem, source, tensor, tolerance

_LINEAR = '''
import torch

def run($ARGS):
    # y = x W^T (+ b) in the model dtype; the matmul accumulates in float32.
    y = x @ weight.t()
    if $BIAS:
        y = y + bias
    return y
'''

_FP8_GEMM = '''
import torch

BLOCK = $BLOCK
FP8_MAX = 448.0

def expand(scale, rows, cols, row_block, col_block):
    # One scale per (row_block x col_block) tile, broadcast back to every element of the tile.
    s = scale.repeat_interleave(row_block, dim=0)[:rows]
    return s.repeat_interleave(col_block, dim=1)[:, :cols]

def run(a, a_scale, b, b_scale):
    m, k = a.shape
    n = b.shape[0]
    a_deq = a.float() * expand(a_scale, m, k, 1, BLOCK)
    b_deq = b.float() * expand(b_scale, n, k, BLOCK, BLOCK)
    return (a_deq @ b_deq.t()).to(torch.bfloat16)

def quantize(x, row_block, col_block):
    rows, cols = x.shape
    r = -(-rows // row_block)
    c = -(-cols // col_block)
    padded = torch.zeros(r * row_block, c * col_block, device=x.device)
    padded[:rows, :cols] = x
    tiles = padded.reshape(r, row_block, c, col_block)
    amax = tiles.abs().amax(dim=(1, 3)).clamp(min=1e-4)
    scale = amax / FP8_MAX
    q = (tiles / scale[:, None, :, None]).reshape(r * row_block, c * col_block)[:rows, :cols]
    return q.to(torch.float8_e4m3fn), scale.float()

def make_inputs(axes, device):
    # Activations are quantised per token and 128-wide slice, weights per 128x128 tile (DeepSeek-V3 recipe).
    x = torch.randn(axes["M"], axes["K"], device=device)
    w = torch.randn(axes["N"], axes["K"], device=device) * axes["K"] ** -0.5
    a, a_scale = quantize(x, 1, BLOCK)
    b, b_scale = quantize(w, BLOCK, BLOCK)
    return {"a": a, "a_scale": a_scale, "b": b, "b_scale": b_scale}
'''

_EMBEDDING = '''
import torch

def run(token_ids, table):
    return table[token_ids]

def make_inputs(axes, device):
    return {
        "token_ids": torch.randint(0, axes["V"], (axes["T"],), device=device, dtype=torch.int64),
        "table": torch.randn(axes["V"], axes["H"], device=device).to($DTYPE),
    }
'''

_PATCH_EMBED = '''
import torch
import torch.nn.functional as F

PATCH = $PATCH

def run($ARGS):
    # A stride-PATCH convolution cuts the image into patches and projects each one.
    y = F.conv2d(pixels, weight, $BIAS_ARG, stride=PATCH)
    return y.flatten(2).transpose(1, 2)
'''


def projection_inputs(*, bias: bool, dtype: str, rows: Rows) -> dict[str, dict[str, Any]]:
    """The inputs of y = x W^T (+ b): x [*rows, K], the weight [N, K], then the bias [N] when there is one."""
    inputs = {"x": tensor([*rows.names, "K"], dtype), "weight": tensor(["N", "K"], dtype)}
    if bias:
        inputs["bias"] = tensor(["N"], dtype)
    return inputs


def linear(*, in_features: int, out_features: int, bias: bool, dtype: str, rows: Rows):
    name = f"linear{'_bias' if bias else ''}_k{in_features}_n{out_features}{rows.tag}_{SHORT[dtype]}"
    inputs = projection_inputs(bias=bias, dtype=dtype, rows=rows)
    return problem(
        name=name, level="L1", op_type="linear",
        summary=f"Projection {in_features} -> {out_features}{' with bias' if bias else ''}, {dtype} (y = x W^T"
        f"{' + b' if bias else ''}).",
        axes={**rows.axis_defs, "K": const(in_features), "N": const(out_features)},
        inputs=inputs,
        outputs={"y": tensor([*rows.names, "N"], dtype)},
        reference=source(_LINEAR, raw={"ARGS": ", ".join(inputs)}, BIAS=bias),
        sizes=rows.sizes, tol=tolerance(dtype, "gemm"),
        tags=("gemm", "forward"),
    )  # fmt: skip


def fp8_blockscale_gemm(*, in_features: int, out_features: int, block: int, sizes: tuple[int, ...]):
    name = f"fp8_blockscale_gemm_k{in_features}_n{out_features}_b{block}"
    return problem(
        name=name, level="L1", category="Quant", op_type="fp8_gemm",
        summary=f"fp8 (e4m3) GEMM {in_features} -> {out_features} with float32 scales per 1x{block} activation "
        f"slice and per {block}x{block} weight tile, bf16 output.",
        axes={"M": VAR, "K": const(in_features), "N": const(out_features), "BLK": const(block),
              "KB": expr("(K + BLK - 1) // BLK"), "NB": expr("(N + BLK - 1) // BLK")},
        inputs={"a": tensor(["M", "K"], "float8_e4m3fn"), "a_scale": tensor(["M", "KB"], "float32"),
                "b": tensor(["N", "K"], "float8_e4m3fn"), "b_scale": tensor(["NB", "KB"], "float32")},
        outputs={"y": tensor(["M", "N"], "bfloat16")},
        reference=source(_FP8_GEMM, BLOCK=block),
        sizes=({"M": m} for m in sizes), tol=tolerance("bfloat16", "gemm"),
        tags=("gemm", "quant", "fp8", "forward"),
    )  # fmt: skip


def embedding(*, vocab: int, hidden: int, dtype: str, rows: Rows):
    name = f"embedding_v{vocab}_h{hidden}_{SHORT[dtype]}"
    return problem(
        name=name, level="L1", op_type="embedding",
        summary=f"Token embedding gather from a {vocab} x {hidden} table, {dtype}.",
        axes={**rows.axis_defs, "V": const(vocab), "H": const(hidden)},
        inputs={"token_ids": tensor(["T"], "int64"), "table": tensor(["V", "H"], dtype)},
        outputs={"y": tensor(["T", "H"], dtype)},
        reference=source(_EMBEDDING, raw={"DTYPE": f"torch.{dtype}"}),
        sizes=rows.sizes, tol={"max_atol": 0.0, "max_rtol": 0.0, "required_matched_ratio": 1.0},
        tags=("gather", "forward"),
    )  # fmt: skip


def patch_embed(*, channels: int, image: int, patch: int, hidden: int, bias: bool, dtype: str,
                batches: tuple[int, ...]):  # fmt: skip
    grid = image // patch
    name = f"patch_embed_c{channels}_img{image}_p{patch}_h{hidden}{'_bias' if bias else ''}_{SHORT[dtype]}"
    inputs = {"pixels": tensor(["B", "C", "IMG", "IMG"], dtype), "weight": tensor(["H", "C", "P", "P"], dtype)}
    if bias:
        inputs["bias"] = tensor(["H"], dtype)
    return problem(
        name=name, level="L1", op_type="conv2d",
        summary=f"Patch embedding: {patch}x{patch} stride-{patch} convolution of a {channels}x{image}x{image} input "
        f"into {grid * grid} tokens of {hidden}{' (with bias)' if bias else ''}, {dtype}.",
        axes={"B": VAR, "C": const(channels), "IMG": const(image), "P": const(patch), "H": const(hidden),
              "NP": expr("(IMG // P) * (IMG // P)")},
        inputs=inputs,
        outputs={"tokens": tensor(["B", "NP", "H"], dtype)},
        reference=source(_PATCH_EMBED, raw={"ARGS": ", ".join(inputs), "BIAS_ARG": "bias" if bias else "None"},
                         PATCH=patch),
        sizes=({"B": b} for b in batches), tol=tolerance(dtype, "gemm"),
        tags=("conv", "gemm", "forward"),
    )  # fmt: skip
