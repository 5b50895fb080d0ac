"""Choosing how a family's op runs a call shape, by measurement on the shape's first call.

A family op may have several ways of running one shape (a library call, its own kernel at a few block sizes),
and which is fastest differs by GPU and shape. Each shape's first call, outside CUDA-graph capture, runs the
default way and every other way that accepts the call, keeps those whose output agrees with the default's,
times them and remembers the fastest; later calls (and captures) use it.

Shipped inside subgraph candidates, and inside the GEMM family's as ``solforge_way.py``: torch only.
"""

from __future__ import annotations

import functools
import statistics
import sys
from typing import Callable, Hashable, Mapping, MutableMapping

import torch

DEFAULT = "default"  # the library's own way: the contender every other way must agree with


Outputs = torch.Tensor | tuple[torch.Tensor, ...]


def _as_tuple(x: Outputs) -> tuple[torch.Tensor, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def agrees(out: Outputs, base: Outputs) -> bool:
    """Whether a way's output(s) match the default's: same shapes; floating values within 2e-2 (absolute and
    relative), integer ones (indices) equal."""
    outs, bases = _as_tuple(out), _as_tuple(base)
    if len(outs) != len(bases):
        return False
    for o, b in zip(outs, bases):
        if o.shape != b.shape or o.dtype.is_floating_point != b.dtype.is_floating_point:
            return False
        if o.dtype.is_floating_point:
            if not torch.allclose(o.float(), b.float(), atol=2e-2, rtol=2e-2):
                return False
        elif not torch.equal(o, b):
            return False
    return True


def fastest(
    key: Hashable,
    tries: Mapping[str, Callable[[], Outputs]],
    time_ms: Callable[[Callable[[], torch.Tensor]], float],
    memo: MutableMapping[Hashable, str],
    syncs: frozenset[str] = frozenset(),
    times: dict[str, float] | None = None,
) -> str:
    """The name in ``tries`` (``DEFAULT`` first) whose call is fastest among those agreeing with the default's
    output; remembered under ``key``. A way that raises (it does not take this call) or disagrees is left out.
    Ways in ``syncs`` read results on the host: no CUDA graph holds them, so a candidate replaying its call as
    one graph would run the whole call eagerly, which no timing of the op alone shows. They are kept only where
    no other way agrees. ``times``, when given, gets each agreeing way's time."""
    if key in memo:
        return memo[key]
    base = tries[DEFAULT]()
    times = {} if times is None else times
    times[DEFAULT] = time_ms(tries[DEFAULT])
    for name, call in tries.items():
        if name == DEFAULT:
            continue
        try:
            out = call()
        except Exception:  # noqa: BLE001 - a way that does not take this call (a library's refusal, a kernel's limits)
            continue
        if not agrees(out, base):
            continue
        times[name] = time_ms(call)
    capturable = {n: t for n, t in times.items() if n not in syncs} or times
    memo[key] = min(capturable, key=lambda n: (capturable[n], n != DEFAULT))
    return memo[key]


def chosen_way(key: Hashable, ways: Mapping[str, Callable[[], Outputs]], memo: MutableMapping[Hashable, str],
               syncs: frozenset[str] = frozenset(), op: str = "") -> str:  # fmt: skip
    """The way ``key`` runs: measured on its first call outside CUDA-graph capture (``fastest``, GPU time) and
    remembered in ``memo``; the default inside a capture until then (nothing can be timed there). ``syncs``: as
    in ``fastest``. The choice is told in one line (``solforge way OP KEY: keeps WAY; WAY MS ms; ...``), which the
    judge puts in the candidate's trace: whether a family's kernel ran at a shape, or the library's way won."""
    if key in memo or torch.cuda.is_current_stream_capturing():
        return memo.get(key, DEFAULT)
    times: dict[str, float] = {}
    way = fastest(key, ways, cuda_time_ms, memo, syncs, times)
    print(told(op, key, way, times), file=sys.stderr, flush=True)
    return way


def told(op: str, key: Hashable, way: str, times: Mapping[str, float]) -> str:
    """One line on a choice: the op, its call's key (shortened), the way kept and each agreeing way's time."""
    measured = "; ".join(f"{n} {t:.4f} ms" for n, t in times.items())
    return f"solforge way {op + ' ' if op else ''}{str(key)[:120]}: keeps {way}; {measured}"[:300]


def cuda_time_ms(call: Callable[[], torch.Tensor], budget_ms: float = 5.0, preroll_us: float = 100.0) -> float:
    """The median of a few timed runs of ``call`` on the current stream, after one warm run: the GPU's time.

    Each run is timed between events after a spin kernel of about ``preroll_us``, so the host has queued the
    call before the first event is passed: a family op runs inside the candidate's CUDA graph, where its host
    launch cost is gone, and a Triton kernel's launch from Python (tens of µs) would otherwise decide the choice.
    """
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once() -> float:
        torch.cuda._sleep(cycles)
        start.record()
        call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    call()
    cycles = _spin_cycles(torch.cuda.current_device(), preroll_us)
    reps = max(3, min(25, int(budget_ms / max(once(), 1e-3))))
    return statistics.median(once() for _ in range(reps))


@functools.lru_cache(maxsize=None)
def _spin_cycles(device: int, preroll_us: float) -> int:
    """SM cycles for which ``torch.cuda._sleep`` spins about ``preroll_us`` once the GPU's clock is up."""
    torch.cuda._sleep(20_000_000)  # ~10 ms of load: an idle GPU's clock comes up first
    probe = 200_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    return max(1, round(probe * preroll_us / max(start.elapsed_time(end) * 1e3, 1e-3)))


def stored(results: Outputs, out: tuple[torch.Tensor, ...] | None) -> Outputs:
    """``results`` copied into ``out`` where given (a way that allocates its own outputs, run for an op asked to
    store into buffers: ``ops.py``'s twins), else as they are."""
    if out is None:
        return results
    for dst, src in zip(out, _as_tuple(results), strict=True):
        dst.copy_(src)
    return out if isinstance(results, (tuple, list)) else out[0]
