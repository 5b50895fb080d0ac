"""Host cost of the judge's two CUDA timers against the number of kernels a call launches.

The CUPTI device window turns every kernel record into a Python event; the judge's clock around a request holds
that work, the event timer's does not. For 0..1024 tiny kernels, launched eagerly and as one CUDA graph: the
median device time each timer reports and the median host wall time of its ``time`` call.

Usage:  python bench/cupti_cost.py --out /tmp/cupti_cost.md     (a CUDA GPU; CUPTI from cuda-python / torch)
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from report_text import emit_report
from sol_bench.device_window import DeviceWindowTimer
from sol_bench.timing import CudaTimer

KERNELS = (0, 1, 16, 64, 256, 1024)


def eager_adds(x: torch.Tensor, n: int) -> Callable[[], None]:
    def call() -> None:
        for _ in range(n):
            x.add_(1.0)

    return call


def graphed_adds(x: torch.Tensor, n: int) -> Callable[[], None]:
    call = eager_adds(x, n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm-up off the capturing stream, as torch.cuda.graph asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def medians(timer, call: Callable[[], object], repeats: int) -> tuple[float, float]:
    device_ms, wall_ms = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ms, _, _ = timer.time(call)
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        device_ms.append(ms)
    return statistics.median(device_ms), statistics.median(wall_ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/cupti_cost.py measures CUDA timers: no CUDA device here")
    dev = torch.device("cuda")
    x = torch.zeros(1024, device=dev)
    timers = {"cupti": DeviceWindowTimer(dev), "events": CudaTimer(dev, 20.0, "stream")}
    lines = [f"CUDA timer host cost, {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, medians of "
             f"{args.repeats}", "", "| launch | kernels | timer | device ms | judge clock ms | clock - device ms |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for launch, make in (("eager", eager_adds), ("graph", graphed_adds)):
        for n in KERNELS:
            call = make(x, n) if n else (lambda: None)
            for name, timer in timers.items():
                device_ms, wall_ms = medians(timer, call, args.repeats)
                lines.append(f"| {launch} | {n} | {name} | {device_ms:.4f} | {wall_ms:.4f} | {wall_ms - device_ms:.4f} |")
    emit_report(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
