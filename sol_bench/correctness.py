"""Compare a candidate's outputs with the reference's (compatible semantics, failing closed)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import WrongDtype, WrongNumbers, WrongShape
from .models import Tolerance


@dataclass(frozen=True)
class Comparison:
    max_absolute_error: float
    max_relative_error: float
    matched_ratio: float
    has_nan: bool
    has_inf: bool


def _as_float(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float16, torch.bfloat16, torch.float32):
        return t.to(torch.float32)
    if t.is_floating_point():
        return t.to(torch.float64)
    if t.dtype == torch.bool:
        return t.to(torch.float32)
    if t.element_size() == 1 and not t.is_signed() and t.dtype != torch.uint8:
        return t.view(torch.uint8).to(torch.float32)  # packed fp4: compare the raw codes
    return t.to(torch.float64)


def matched_ratio(within: torch.Tensor) -> float:
    """The share of True in ``within``, exact: 1.0 when all are. On CUDA a mean is the sum times 1/N, which for
    some N (41984, 6936) falls a rounding step short of 1.0 and failed outputs that match bit for bit."""
    return int(within.sum()) / within.numel()


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Raise WrongShape / WrongDtype / WrongNumbers, or return the error statistics of a match."""
    if tuple(out.shape) != tuple(ref.shape):
        raise WrongShape(f"output {name!r}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        raise WrongDtype(f"output {name!r}: dtype {out.dtype}, expected {ref.dtype}")
    o = _as_float(out.detach()).to("cpu") if out.device.type == "meta" else _as_float(out.detach())
    r = _as_float(ref.detach()).to(o.device)
    if o.numel() == 0:
        return Comparison(0.0, 0.0, 1.0, False, False)

    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    o_inf, r_inf = torch.isinf(o), torch.isinf(r)
    # Special values: NaN never passes; -inf may match -inf only where allowed.
    neg_inf_ok = (r == float("-inf")) & (o == float("-inf")) if tol.allow_negative_inf else torch.zeros_like(o_nan)
    has_nan = bool(o_nan.any())
    bad_inf = (o_inf | r_inf) & ~neg_inf_ok
    has_inf = bool((o_inf & ~neg_inf_ok).any())
    finite = ~(o_nan | r_nan | bad_inf | neg_inf_ok)

    diff = torch.where(finite, (o - r).abs(), torch.zeros_like(o))
    rel = torch.where(finite, diff / r.abs().clamp_min(torch.finfo(torch.float32).tiny), torch.zeros_like(o))
    within = finite & (diff <= tol.max_atol + tol.max_rtol * r.abs())
    within = within | neg_inf_ok
    matched = matched_ratio(within)
    max_abs = float(diff.max())
    max_rel = float(rel.max())
    stats = Comparison(max_abs, max_rel, matched, has_nan, has_inf)

    if has_nan:
        raise WrongNumbers(f"output {name!r}: holds NaN", stats)
    if has_inf:
        raise WrongNumbers(f"output {name!r}: holds Inf where the reference does not allow it", stats)
    if bool((r_nan | (r_inf & ~neg_inf_ok)).any()):
        raise WrongNumbers(f"output {name!r}: the reference holds NaN/Inf at places the output cannot match", stats)
    if bool((r != 0).any()) and not bool((o != 0).any()):
        raise WrongNumbers(f"output {name!r}: all zeros against a non-zero reference", stats)
    if matched < tol.required_matched_ratio:
        raise WrongNumbers(
            f"output {name!r}: {matched:.4%} of elements within atol={tol.max_atol} rtol={tol.max_rtol} "
            f"(need {tol.required_matched_ratio:.2%}); max abs error {max_abs:.4g}",
            stats,
        )
    if tol.max_error_cap is not None and max_abs > tol.max_error_cap:
        raise WrongNumbers(f"output {name!r}: max abs error {max_abs:.4g} > cap {tol.max_error_cap}", stats)
    return stats


def first_mismatches(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, k: int = 5) -> list[str]:
    """The first few mismatching elements, for feedback to agents."""
    if tuple(out.shape) != tuple(ref.shape) or out.numel() == 0:
        return []
    o, r = _as_float(out).flatten(), _as_float(ref).flatten().to(out.device)
    bad = ~((o - r).abs() <= tol.max_atol + tol.max_rtol * r.abs())
    idx = torch.nonzero(bad).flatten()[:k].tolist()
    shape = tuple(out.shape)
    lines = []
    for i in idx:
        coord = []
        rem = i
        for s in reversed(shape):
            coord.append(rem % s)
            rem //= s
        lines.append(f"[{', '.join(map(str, reversed(coord)))}] got {float(o[i]):.6g} expected {float(r[i]):.6g}")
    return lines
