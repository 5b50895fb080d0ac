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


# Elements compared at a time: the statistics are sums, maxima and flags, so they add up over chunks, and the
# temporaries of a comparison (about a dozen of its size) stay near a GiB instead of many times the output: a
# 9115 x 53061 output compared whole takes some 20 GiB of float32 and bool temporaries in the judge's process, which
# its caching allocator then keeps from the candidate's (a softmax ran out of memory so on an 80 GB H100).
COMPARE_CHUNK = 1 << 24


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, chunk: int = COMPARE_CHUNK) -> Comparison:
    """Raise WrongShape / WrongDtype / WrongNumbers, or return the error statistics of a match."""
    if tuple(out.shape) != tuple(ref.shape):
        raise WrongShape(f"output {name!r}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        raise WrongDtype(f"output {name!r}: dtype {out.dtype}, expected {ref.dtype}")
    out_flat = out.detach().to("cpu") if out.device.type == "meta" else out.detach()
    out_flat = out_flat.reshape(-1)
    ref_flat = ref.detach().reshape(-1)
    n = out_flat.numel()
    if n == 0:
        return Comparison(0.0, 0.0, 1.0, False, False)

    acc = _Tally(out_flat.device)
    for i in range(0, n, chunk):
        acc.add(_as_float(out_flat[i : i + chunk]), _as_float(ref_flat[i : i + chunk]).to(out_flat.device), tol)
    max_abs, max_rel, matched_count = float(acc.max_abs), float(acc.max_rel), int(acc.matched)
    has_nan, has_inf = bool(acc.o_nan), bool(acc.o_bad_inf)
    # counted, not a mean: on CUDA a mean is the sum times 1/N, which for some N (41984, 6936) falls a rounding step
    # short of 1.0 and failed outputs that match bit for bit
    matched = matched_count / n
    stats = Comparison(max_abs, max_rel, matched, has_nan, has_inf)

    if has_nan:
        raise WrongNumbers(f"output {name!r}: holds NaN", stats)
    if has_inf:
        raise WrongNumbers(f"output {name!r}: holds Inf where the reference does not allow it", stats)
    if bool(acc.r_special):
        raise WrongNumbers(f"output {name!r}: the reference holds NaN/Inf at places the output cannot match", stats)
    if bool(acc.r_nonzero) and not bool(acc.o_nonzero):
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


class _Tally:
    """A comparison's statistics over the chunks seen so far, kept on the device (one sync at the end)."""

    def __init__(self, device: torch.device) -> None:
        zero = torch.zeros((), dtype=torch.float64, device=device)  # exact for every chunk's float32 or float64
        self.max_abs, self.max_rel = zero.clone(), zero.clone()
        self.matched = torch.zeros((), dtype=torch.int64, device=device)
        no = torch.zeros((), dtype=torch.bool, device=device)
        self.o_nan, self.o_bad_inf, self.r_special, self.o_nonzero, self.r_nonzero = (no.clone() for _ in range(5))

    def add(self, o: torch.Tensor, r: torch.Tensor, tol: Tolerance) -> None:
        o_nan, r_nan = torch.isnan(o), torch.isnan(r)
        o_inf, r_inf = torch.isinf(o), torch.isinf(r)
        # Special values: NaN never passes; -inf may match -inf only where allowed.
        neg_inf_ok = (r == float("-inf")) & (o == float("-inf")) if tol.allow_negative_inf else torch.zeros_like(o_nan)
        bad_inf = (o_inf | r_inf) & ~neg_inf_ok
        finite = ~(o_nan | r_nan | bad_inf | neg_inf_ok)
        diff = torch.where(finite, (o - r).abs(), torch.zeros_like(o))
        rel = torch.where(finite, diff / r.abs().clamp_min(torch.finfo(torch.float32).tiny), torch.zeros_like(o))
        within = (finite & (diff <= tol.max_atol + tol.max_rtol * r.abs())) | neg_inf_ok
        self.matched += within.sum()
        self.max_abs = torch.maximum(self.max_abs, diff.max().to(self.max_abs.dtype))
        self.max_rel = torch.maximum(self.max_rel, rel.max().to(self.max_rel.dtype))
        self.o_nan |= o_nan.any()
        self.o_bad_inf |= (o_inf & ~neg_inf_ok).any()
        self.r_special |= (r_nan | (r_inf & ~neg_inf_ok)).any()
        self.o_nonzero |= (o != 0).any()
        self.r_nonzero |= (r != 0).any()


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
