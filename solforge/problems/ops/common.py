"""Shared pieces of the op builders: tensor specs, leading axes, tolerances, workloads, reference text."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from string import Template
from typing import Any, Iterable

from ..draft import ProblemDraft, workload_uuid

SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}

# Sizes the var axes take. Decode-sized first (the CPU check runs the smallest), then prefill, with odd sizes.
TOKENS = (1, 7, 64, 333, 512, 2048, 4097, 16384)
PREFILL = (7, 333, 512, 2048, 4097, 8192, 16384)
BATCH_VISION = (1, 2, 7, 16, 64)
BATCH_GENERATIVE = (1, 2, 3, 8, 16)
DECODE_CACHE = ((1, 512), (7, 4097), (16, 2048), (32, 8192), (64, 1024), (1, 16384))

# (max_atol, max_rtol) per dtype and kind of computation. Element-wise work rounds once; a GEMM adds
# accumulation-order differences; a block chains several roundings of intermediates.
_TOL = {
    "bfloat16": {"elementwise": (1e-2, 1e-2), "gemm": (2e-2, 2e-2), "block": (3e-2, 3e-2)},
    "float16": {"elementwise": (2e-3, 2e-3), "gemm": (5e-3, 5e-3), "block": (1e-2, 1e-2)},
    "float32": {"elementwise": (1e-5, 1e-4), "gemm": (1e-4, 1e-4), "block": (2e-4, 2e-4)},
}


def tolerance(dtype: str, kind: str) -> dict[str, float]:
    atol, rtol = _TOL[dtype][kind]
    return {"max_atol": atol, "max_rtol": rtol}


def tensor(shape: Iterable[str | int] | None, dtype: str) -> dict[str, Any]:
    return {"shape": None if shape is None else [str(s) for s in shape], "dtype": dtype}


def const(value: int) -> dict[str, Any]:
    return {"type": "const", "value": int(value)}


VAR = {"type": "var"}


def expr(expression: str) -> dict[str, Any]:
    return {"type": "expr", "expression": expression}


@dataclass(frozen=True)
class Rows:
    """The leading axes of a row-wise op: tokens ``[T]`` or batch x fixed sequence ``[B, N]``."""

    axes: tuple[tuple[str, dict[str, Any]], ...]
    sizes: tuple[dict[str, int], ...]
    tag: str

    @property
    def names(self) -> list[str]:
        return [a for a, _ in self.axes]

    @property
    def axis_defs(self) -> dict[str, dict[str, Any]]:
        return dict(self.axes)


def token_rows(sizes: tuple[int, ...] = TOKENS) -> Rows:
    return Rows(axes=(("T", VAR),), sizes=tuple({"T": t} for t in sizes), tag="")


def batch_rows(seq: int, sizes: tuple[int, ...] = BATCH_VISION) -> Rows:
    return Rows(axes=(("B", VAR), ("N", const(seq))), sizes=tuple({"B": b} for b in sizes), tag=f"_tok{seq}")


def source(template: str, raw: dict[str, str] | None = None, **consts: Any) -> str:
    """Reference source from a template: ``$NAME`` takes ``repr`` of a constant, or a ``raw`` code fragment."""
    values = {k: repr(v) for k, v in consts.items()} | dict(raw or {})
    return Template(textwrap.dedent(template).lstrip("\n")).substitute(values)


def eps_tag(eps: float) -> str:
    exponent = f"{eps:.0e}".split("e")[1]
    return f"eps{int(exponent[1:])}" if f"{eps:.0e}" == f"1e{exponent}" and eps < 1 else f"eps{eps!r}"


def workloads(
    name: str,
    sizes: Iterable[dict[str, int]],
    inputs: dict[str, dict[str, Any]],
    tol: dict[str, float],
) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"uuid": workload_uuid(name, s), "axes": dict(s), "inputs": inputs, "tolerance": tol} for s in sizes
    )


def random_inputs(names: Iterable[str], scalars: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {n: {"type": "random"} for n in names}
    for k, v in (scalars or {}).items():
        out[k] = {"type": "scalar", "value": v}
    return out


def custom_inputs(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    return {n: {"type": "custom"} for n in names}


def problem(
    *,
    name: str,
    level: str,
    op_type: str,
    summary: str,
    axes: dict[str, dict[str, Any]],
    inputs: dict[str, dict[str, Any]],
    outputs: dict[str, dict[str, Any]],
    reference: str,
    sizes: Iterable[dict[str, int]],
    tol: dict[str, float],
    tags: tuple[str, ...],
    scalars: dict[str, float] | None = None,
    category: str | None = None,
) -> ProblemDraft:
    """A problem with one workload per entry of ``sizes``, all with the same inputs and tolerance.

    A reference that defines ``make_inputs`` draws every input itself; otherwise the inputs are random but for
    ``scalars``, which take fixed values. ``category`` (the folder it is written under) defaults to the level.
    """
    if "\ndef make_inputs(" in reference:
        drawn, entrypoint = custom_inputs(inputs), "make_inputs"
    else:
        drawn, entrypoint = random_inputs([n for n in inputs if n not in (scalars or {})], scalars), None
    return ProblemDraft(
        name=name, level=level, category=category or level, op_type=op_type, summary=summary, axes=axes,
        inputs=inputs, outputs=outputs, reference=reference, workloads=workloads(name, sizes, drawn, tol),
        custom_inputs_entrypoint=entrypoint, tags=tags,
    )  # fmt: skip


_INIT_TEMPLATE = '''
INIT = $INIT

def make_inputs(axes, device):
    # Trained-model scales: unit activations, weights ~ 1/sqrt(fan-in), small biases, norm scales near one.
    out = {}
    for name, (kind, dims) in INIT.items():
        shape = [int(d) if d.isdigit() else axes[d] for d in dims]
        v = torch.randn(*shape, device=device)
        if kind == "weight":
            fan_in = 1
            for s in shape[1:]:
                fan_in *= s
            v = v * fan_in ** -0.5
        elif kind == "stacked_weight":
            v = v * shape[-1] ** -0.5
        elif kind == "bias":
            v = v * 0.1
        elif kind == "norm":
            v = 1.0 + 0.1 * v
        out[name] = v.to($DTYPE)
    return out
'''


def init_source(inputs: dict[str, dict[str, Any]], kinds: dict[str, str], dtype: str) -> str:
    """A ``make_inputs`` for the reference that draws every input at the scale a trained model has.

    Used by fused blocks whose bf16 intermediates would otherwise grow so large that rounding noise swamps
    the tolerance. ``kinds``: input name -> act | weight | stacked_weight | bias | norm (default act).
    """
    table = {n: (kinds.get(n, "act"), tuple(spec["shape"])) for n, spec in inputs.items()}
    return source(_INIT_TEMPLATE, raw={"DTYPE": f"torch.{dtype}"}, INIT=table)


def kinds_by_prefix(inputs: Iterable[str]) -> dict[str, str]:
    """Guess each input's init kind from its name: w* weights, b* biases, *norm* scales, the rest activations."""
    out = {}
    for n in inputs:
        if "norm" in n or n.startswith("ln_") or n == "gamma":
            out[n] = "bias" if n.endswith("_b") else "norm"
        elif n.startswith(("w", "conv")) and not n.endswith("_b") or n in ("dw_w", "temb_w", "gate_weight"):
            out[n] = "weight"
        elif n.startswith("b") or n.endswith("_b"):
            out[n] = "bias"
    return out


def with_init(
    reference: str, inputs: dict[str, dict[str, Any]], dtype: str, kinds: dict[str, str] | None = None
) -> str:
    """``reference`` followed by its ``make_inputs`` (``init_source``): each input's kind from its name
    (``kinds_by_prefix``) unless ``kinds`` gives it."""
    return reference + "\n" + init_source(inputs, {**kinds_by_prefix(inputs), **(kinds or {})}, dtype)
