"""Choosing how a family's op runs a call shape, by measurement on the shape's first call.

A family op may have several ways of running one shape (a library call, its own kernel at a few block sizes),
and which is fastest differs by GPU and shape. Each shape's first call, outside CUDA-graph capture, runs the
default way and every other way that accepts the call, keeps those whose output agrees with the default's,
times them and remembers the fastest; later calls (and captures) use it.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping, MutableMapping

import torch

DEFAULT = "default"  # the library's own way: the contender every other way must agree with


def fastest(
    key: Hashable,
    tries: Mapping[str, Callable[[], torch.Tensor]],
    time_ms: Callable[[Callable[[], torch.Tensor]], float],
    memo: MutableMapping[Hashable, str],
) -> str:
    """The name in ``tries`` (``DEFAULT`` first) whose call is fastest among those agreeing with the default's
    output; remembered under ``key``. A way that raises (it does not take this call) or disagrees is left out."""
    if key in memo:
        return memo[key]
    base = tries[DEFAULT]()
    times = {DEFAULT: time_ms(tries[DEFAULT])}
    for name, call in tries.items():
        if name == DEFAULT:
            continue
        try:
            out = call()
        except Exception:  # noqa: BLE001 - a way that does not take this call (a library's refusal, a kernel's limits)
            continue
        if out.shape != base.shape or not torch.allclose(out.float(), base.float(), atol=2e-2, rtol=2e-2):
            continue
        times[name] = time_ms(call)
    memo[key] = min(times, key=lambda n: (times[n], n != DEFAULT))
    return memo[key]


def cuda_time_ms(call: Callable[[], torch.Tensor], budget_ms: float = 5.0) -> float:
    """The median of a few timed runs of ``call`` on the current stream, after one warm run."""
    call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    end.synchronize()
    once = max(start.elapsed_time(end), 1e-3)
    reps = max(3, min(25, int(budget_ms / once)))
    seen = []
    for _ in range(reps):
        start.record()
        call()
        end.record()
        end.synchronize()
        seen.append(start.elapsed_time(end))
    return sorted(seen)[len(seen) // 2]
