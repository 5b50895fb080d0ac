"""Which of SDPA's fused backends runs an attention shape: chosen by measurement on the shape's first call.

SDPA's own order (FlashAttention, then memory-efficient, then cuDNN, then math) is fixed, but the fastest differs
by GPU, head dim, sequence length and GQA ratio. So each shape's first call, outside CUDA-graph capture, runs
SDPA's default and every other fused backend that accepts the call, keeps those whose output agrees with the
default's, times them and remembers the fastest; later calls (and captures) use it.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping, MutableMapping

import torch

DEFAULT = "default"  # SDPA's own choice: the contender every other backend must agree with
FUSED = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def fastest(
    key: Hashable,
    tries: Mapping[str, Callable[[], torch.Tensor]],
    time_ms: Callable[[Callable[[], torch.Tensor]], float],
    memo: MutableMapping[Hashable, str],
) -> str:
    """The name in ``tries`` (``DEFAULT`` first) whose call is fastest among those agreeing with the default's
    output; remembered under ``key``. A backend that raises (it does not take this call) or disagrees is left out."""
    if key in memo:
        return memo[key]
    base = tries[DEFAULT]()
    times = {DEFAULT: time_ms(tries[DEFAULT])}
    for name, call in tries.items():
        if name == DEFAULT:
            continue
        try:
            out = call()
        except Exception:  # noqa: BLE001 - a way that does not take this call (SDPA's refusal, a kernel's limits)
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


def run_with(backend: str, call: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``call`` with SDPA limited to ``backend`` (or left to its default)."""
    if backend == DEFAULT:
        return call()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, backend)]):
        return call()
