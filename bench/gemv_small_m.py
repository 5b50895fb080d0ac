"""`bench/gemv_small_m.py`: the small-M linear family's Triton GEMV (``families/gemv/kernel.py``) against cuBLAS
(``F.linear``) on decode-shaped linears: M rows of activations against common LLM weight shapes, each block
shape of the kernel timed with the judge's per-call recipe (``sol_bench.timing.time_callable``: L2 flushed,
the events timer), and the fraction of the HBM roofline (weight bytes / time) each reaches.

The family runs inside a CUDA graph, where launching from Python costs nothing; so the pre-roll here is long
(100 µs) and the timer is events: the host has queued both kernels before the window opens. Under the CUPTI
window (no pre-roll) the gap while Python launches the second kernel is counted: every shape read ~33 µs.

    python bench/gemv_small_m.py -o /tmp/gemv.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from agents.offline.subgraph.families.gemv.kernel import _BLOCKS, gemv  # noqa: E402
from report_text import emit_report  # noqa: E402
from sol_bench.timing import time_callable  # noqa: E402

# (K, N): hidden -> fused QKV / MLP up / down / vocab-sized projections of 1-8B models (not the problem sets')
SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096), (2048, 2560), (1024, 3072), (3072, 1024), (8192, 1024),
          (4096, 512))  # fmt: skip
ROWS = (1, 4, 16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timer", default="events")
    ap.add_argument("--preroll-us", type=float, default=100.0)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--hbm-tbps", type=float, default=0.0, help="roofline bandwidth (default: H100 3.35, H200 4.8)")
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    hbm = args.hbm_tbps or (4.8 if "H200" in name else 3.35)
    dtype = getattr(torch, args.dtype)
    lines = [f"Small-M linear on {name} ({args.dtype}, {args.timer} timer, {args.preroll_us:.0f} µs pre-roll): "
             f"µs per call; roofline at {hbm} TB/s", "",
             "| M | K | N | cuBLAS µs | " + " | ".join(f"gemv {bn}x{bk} µs" for bn, bk, _ in _BLOCKS)
             + " | best vs cuBLAS | best % roofline |",
             "|---:|---:|---:|---:|" + "---:|" * len(_BLOCKS) + "---:|---:|"]  # fmt: skip
    for k, n in SHAPES:
        w = torch.randn(n, k, device=dev, dtype=dtype) * k**-0.5
        bias = torch.randn(n, device=dev, dtype=dtype)
        for m in ROWS:
            a = torch.randn(m, k, device=dev, dtype=dtype)
            want = F.linear(a, w, bias)
            cublas = time_callable(lambda: F.linear(a, w, bias), dev, preroll_us=args.preroll_us, timer=args.timer)
            base = cublas.median_ms * 1e3
            cells = []
            for bn, bk, warps in _BLOCKS:
                got = gemv(a, w, bias, bn, bk, warps)
                if not torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2):
                    cells.append(float("nan"))
                    continue
                stats = time_callable(lambda: gemv(a, w, bias, bn, bk, warps), dev, preroll_us=args.preroll_us,
                                      timer=args.timer)
                cells.append(stats.median_ms * 1e3)
            best = min((c for c in cells if c == c), default=float("nan"))
            roof = (n * k + m * k + m * n) * w.element_size() / (hbm * 1e6)  # µs
            lines.append(f"| {m} | {k} | {n} | {base:.2f} | " + " | ".join(f"{c:.2f}" for c in cells)
                         + f" | {base / best:.2f}x | {100 * roof / best:.0f}% |")  # fmt: skip
            print(lines[-1], flush=True)
    emit_report(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
