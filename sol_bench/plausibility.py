"""Whether a measured time is physically plausible: the speed-of-light floor and the judge's own clock."""

from __future__ import annotations

import torch

from .models import Definition, Workload


def sol_floor(definition: Definition, w: Workload, hardware: str, device: torch.device) -> tuple[float | None, str | None, str]:
    """T_SOL for this workload on this device, or (None, None, why)."""
    try:
        from .sol.analyze import analyze_workload
        from .sol.hardware import get_hardware
    except ImportError:
        return None, None, "speed-of-light analyzer not available"
    try:
        hw = get_hardware(hardware, str(device))
        res = analyze_workload(definition, w, hw)
    except Exception as e:  # noqa: BLE001 - an analysis gap must not fail the candidate; it is logged
        return None, None, f"speed-of-light analysis failed: {type(e).__name__}: {e}"
    return float(res.t_sol_ms), str(getattr(hw, "name", hardware)), ""


def below_sol_on_host_clock(upper_ms: float, noise_ms: float, bound_ms: float) -> bool:
    """Whether a host-clock time proves a call beat the speed-of-light bound.

    `upper_ms` is the median call less the *fastest* empty call, so it over-states the candidate's own time;
    `noise_ms` is the jitter of the empty calls (or a floor, whichever is larger). A bound inside it is below
    what the clock resolves (tiny CPU workloads have T_SOL of nanoseconds), so it proves nothing either way.
    """
    return bound_ms > noise_ms and upper_ms < bound_ms


def clock_disagreement(reported_ms: float, call_wall_ms: float, empty_wall_ms: float) -> str | None:
    """Why the judge's clock contradicts a reported time, or None: a backstop for gross lies only.

    `call_wall_ms` and `empty_wall_ms` are the judge-clock medians of a timed request and of an empty one
    (same path, nothing called). Real calls also pay GPU context switches between the judge's and the
    candidate's process that the empty call does not (about 0.5 ms seen on an H200), hence the slack.
    """
    excess = call_wall_ms - empty_wall_ms
    if reported_ms * 3 + 1.0 < excess:
        return (
            f"reported {reported_ms:.4f} ms per call but the judge's clock saw {excess:.4f} ms more than an empty "
            f"call ({call_wall_ms:.4f} against {empty_wall_ms:.4f} ms; timer tampering)"
        )
    return None


def host_time_outside_window(reported_ms: float, call_wall_ms: float, empty_wall_ms: float) -> float | None:
    """Under upstream's device window: the judge's clock excess of a call whose window it contradicts, or None.

    That window (first GPU activity to last) leaves out host work before a call's first kernel, and the judge's
    clock around a request under it also holds the profiler's handling of each kernel record, so honest code
    (a Python runtime in front of a graph replay; a graph of hundreds of kernels) can read far less than the
    clock sees, as a forged report would: the disagreement is no evidence of cheating under this timer. The
    judge re-times such a call under the event timer, whose own backstop then decides.
    """
    if clock_disagreement(reported_ms, call_wall_ms, empty_wall_ms) is None:
        return None
    return call_wall_ms - empty_wall_ms

