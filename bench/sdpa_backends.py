"""SDPA's fused backends timed per attention shape: which is fastest where (the attention family's choice).

For each shape (batch, query heads, KV heads, head dim, tokens, causal) and dtype: each backend's time with CUDA
events (best of 3 rounds of 20 calls), or why it refused the call, and its largest difference from SDPA's default
output. GQA calls pass ``enable_gqa``; ``repeat`` is the default backend on KV heads repeated to the query heads.

Usage:  python bench/sdpa_backends.py --out /tmp/sdpa.md [--shapes 1x8x1x80x2048c,4x32x8x64x1024]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from report_text import emit_report

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}  # fmt: skip
SHAPES = ("1x8x1x80x16384c", "1x8x1x80x2048c", "1x8x1x80x333c", "1x32x1x80x512c", "1x32x8x128x4096c",
          "1x16x2x80x4096c", "1x24x24x80x8192c", "4x32x8x64x1024c", "1x28x1x96x4096c", "1x32x8x128x4096",
          "8x16x16x64x512")  # fmt: skip


def parse_shape(text: str) -> tuple[int, int, int, int, int, bool]:
    """``BxHQxHKVxDxS`` with a trailing ``c`` for causal."""
    causal = text.endswith("c")
    b, hq, hk, d, s = (int(v) for v in text.rstrip("c").split("x"))
    if hq % hk:
        raise ValueError(f"shape {text!r}: query heads {hq} not a multiple of KV heads {hk}")
    return b, hq, hk, d, s, causal


def best_ms(call: Callable[[], object], n: int = 20) -> float:
    for _ in range(3):
        call()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(n):
            call()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / n)
    return best


def row(shape: str, dtype: torch.dtype) -> str:
    b, hq, hk, d, s, causal = parse_shape(shape)
    q = torch.randn(b, hq, s, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(b, hk, s, d, device="cuda", dtype=dtype) for _ in range(2))
    gqa = hq != hk

    def sdpa(kk: torch.Tensor, vv: torch.Tensor, enable_gqa: bool) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=enable_gqa)

    default = sdpa(k, v, gqa).float()
    cells = []
    for backend in BACKENDS.values():
        try:
            with sdpa_kernel([backend]):
                err = (sdpa(k, v, gqa).float() - default).abs().max().item()
                cells.append(f"{best_ms(lambda: sdpa(k, v, gqa)):.4f} ({err:.1e})")
        except RuntimeError as e:
            cells.append(f"refused ({type(e).__name__})")
    kr, vr = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    cells.append(f"{best_ms(lambda: sdpa(kr, vr, False)):.4f}")
    return f"| {shape} | {str(dtype).removeprefix('torch.')} | " + " | ".join(cells) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="BxHQxHKVxDxS[c], comma-separated")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/sdpa_backends.py times CUDA backends: no CUDA device here")
    torch.manual_seed(0)
    lines = [f"SDPA backends, {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN "
             f"{torch.backends.cudnn.version()}; ms (largest difference from the default's output)", "",
             "| shape BxHQxHKVxDxS (c: causal) | dtype | " + " | ".join(BACKENDS) + " | default, repeated KV |",
             "|---|---|" + "---|" * (len(BACKENDS) + 1)]  # fmt: skip
    for dtype in (getattr(torch, name) for name in args.dtypes.split(",")):
        lines += [row(shape, dtype) for shape in args.shapes.split(",")]
    emit_report(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
