"""`bench/gemm_vs_cublas.py`: the repo's GEMM kernels (the Triton GEMM of ``agents/offline/templates/triton_gemm.py``,
no epilogue, and the GEMVs below) against cuBLAS (``torch.matmul``) on the bf16/fp16 GEMMs the problem sets'
references actually run. The bar: at least 86% of cuBLAS on large shapes (M > 64, M*N*K >= 2^30) and at least
cuBLAS at M <= 64.

Shapes: each problem's reference runs on meta tensors (on the CPU for real where an op has no meta kernel and
the workload is small) for up to ``--workloads`` workloads spread by bytes, under a dispatch mode that records
every 2-D ``aten.mm``/``aten.addmm``: M, N, K, dtype and whether B (or A) is a transposed view, as a linear
layer's ``W.t()`` is. Shapes are deduplicated; each remembers its problems.

Timing: per shape, cuBLAS on operands laid out as in the reference, and the Triton GEMM at each tile of a small
grid (small-M tiles for M <= 64; past them, where B is a weight W.t() and the rows suit tensor descriptors, also
the template's descriptor form, the persistent kernel of ``templates/kernels/gemm_persistent.py`` and, where
64x128 tiles leave SMs idle over a long K, K split in slices summed in the same launch, as the GEMM family's
persistent variant dispatches), plus,
where it serves the call (M <= 16, B = W.t()), the small-M family's GEMV
(``families/gemv/kernel.py``) at each of its blocks and the CUDA C++ GEMV template (``templates/gemv_cuda.py``,
each variant built once: ``bench/cuda_gemv_bench.py``); the fastest that matches an fp32 matmul counts. Each is
timed as ``bench/gemv_small_m.py`` does (``sol_bench.timing.time_callable``: L2 flushed, events timer after a
100 µs pre-roll, which hides Python's launch cost as a CUDA graph would; ``--timer cupti`` counts it).

    python bench/gemm_vs_cublas.py data/problems kernels_tmp/fresh --collect-only
    python bench/gemm_vs_cublas.py data/problems kernels_tmp/fresh -o /tmp/gemm.md --json-out /tmp/gemm.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from agents.offline.graph import TraceFailed, failure_line, run_traced  # noqa: E402
from agents.offline.subgraph.families.gemv.kernel import _BLOCKS, gemv, takes  # noqa: E402
from agents.offline.templates.base import TRITON_ARRIVAL_COUNTERS, kernel_source, triton_launcher  # noqa: E402
from agents.offline.templates.gemv_cuda import SMALL_M as CUDA_GEMV_M  # noqa: E402
from agents.offline.templates.triton_gemm import FIT_TILES, TMA_DESCRIPTORS, triton_gemm_kernel  # noqa: E402
from problem_args import problems_parser  # noqa: E402
from report_text import emit_report  # noqa: E402
from sol_bench.problem import Problem, find_problems, load_problem  # noqa: E402
from sol_bench.timing import TIMERS, time_callable  # noqa: E402

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
SMALL_M = 64  # the bar at M <= SMALL_M is cuBLAS itself
LARGE_MNK = 1 << 30  # the 86% bar is for M > SMALL_M and M*N*K at least this
LARGE_BAR = 86.0
TOLERANCE = 1e-2  # max error over the largest |value| of the fp32 product
# (BM, BN, BK, GROUP, num_warps, num_stages)
LARGE_TILES = ((128, 128, 64, 8, 8, 3), (128, 128, 64, 8, 4, 4), (128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3),
               (128, 64, 64, 8, 4, 4), (64, 128, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4))  # fmt: skip
# the persistent kernel's: (BM, BN, BK, GROUP, num_warps, num_stages, SUBTILE, WARP_SPECIALIZE)
PERSISTENT = ((128, 256, 64, 8, 8, 3, True, False), (128, 128, 64, 8, 8, 4, False, False),
              (128, 128, 64, 8, 4, 4, False, False), (128, 256, 64, 8, 8, 3, True, True),
              (128, 128, 64, 8, 4, 3, False, True))  # fmt: skip
SMALL_M_TILES = ((16, 64, 128, 1, 4, 4), (16, 128, 128, 1, 4, 4), (16, 256, 64, 1, 4, 3), (32, 64, 128, 1, 4, 4),
                 (32, 128, 64, 1, 4, 4), (64, 64, 64, 1, 4, 4), (64, 128, 64, 1, 4, 4))  # fmt: skip


@dataclass(frozen=True, order=True)
class Shape:
    """One GEMM C[M, N] = A[M, K] @ B[K, N] as the reference called it."""

    m: int
    n: int
    k: int
    dtype: str  # "bf16" | "fp16"
    b_t: bool  # B is a transposed view of a [N, K] matrix (a linear layer's W.t())
    a_t: bool = False  # A is a transposed view of a [K, M] matrix (weight gradients)

    @property
    def layout(self) -> str:
        return ("B = W.t()" if self.b_t else "B [K,N]") + ("; A = X.t()" if self.a_t else "")

    @property
    def group(self) -> str:
        if self.m <= SMALL_M:
            return "small"
        return "large" if self.m * self.n * self.k >= LARGE_MNK else "other"


class _GemmRecorder(TorchDispatchMode):
    """Every 2-D bf16/fp16 ``mm``/``addmm`` dispatched (both operands of one dtype, no empty dimension)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[Shape] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.removeprefix("aten::")
        operands = args[:2] if name == "mm" else args[1:3] if name == "addmm" else ()
        if len(operands) == 2 and all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in operands):
            a, b = operands
            if a.dtype == b.dtype and a.dtype in DTYPES and min(*a.shape, b.shape[1]) > 0:
                self.shapes.append(Shape(a.shape[0], b.shape[1], a.shape[1], DTYPES[a.dtype], _transposed(b),
                                         _transposed(a)))  # fmt: skip
        return func(*args, **(kwargs or {}))


def _transposed(t: torch.Tensor) -> bool:
    return t.shape[0] > 1 and t.shape[1] > 1 and t.stride(0) == 1 and t.stride(1) != 1


def trace_gemms(problem: Problem, uuid: str) -> tuple[list[Shape], str]:
    """The bf16/fp16 GEMMs of one workload's reference call, and how they were seen ("meta", or "cpu" for real
    where the meta run failed and the workload is small: ``agents.offline.graph.run_traced``); ``TraceFailed``
    when neither ran."""
    workload = next(w for w in problem.workloads if w.uuid == uuid)
    rec, method, _ = run_traced(problem, _GemmRecorder, workload)
    return rec.shapes, method


def collect_shapes(roots: list[Path], workloads: int, log: Callable[[str], None] = print) -> dict[Shape, list[str]]:
    """Every distinct GEMM shape of the problems under ``roots`` -> the problems it came from (sorted). A problem
    (or workload) that fails to load or trace is logged and skipped."""
    found: dict[Shape, set[str]] = defaultdict(set)
    for path in (p for root in roots for p in find_problems(root)):
        try:
            problem = load_problem(path)
            uuids = problem.pick_workloads(workloads, "spread")
        except Exception as e:  # noqa: BLE001 - one bad problem never stops the others
            log(f"skip {path.name}: {failure_line(e, 160)}")
            continue
        failed = []
        for uuid in uuids:
            try:
                shapes, _ = trace_gemms(problem, uuid)
            except Exception as e:  # noqa: BLE001 - nor does one workload
                failed.append(str(e) if isinstance(e, TraceFailed) else failure_line(e))
                continue
            for s in shapes:
                found[s].add(problem.name)
        if failed:
            log(f"skip {problem.name}" + (f" ({len(failed)} of {len(uuids)} workloads)" if len(failed) < len(uuids)
                                          else "") + f": {failed[0]}")  # fmt: skip
    return {s: sorted(found[s]) for s in sorted(found)}


GEMM_SOURCE = """import torch
import triton
import triton.language as tl

{kernel}
{tma_kernel}
{descriptors}
{persistent}
{split_kernel}
{fit}
{counters}
{split_host}
{launcher}
_gemm_launch = _Launcher(_gemm)


def gemm(a, b, bm, bn, bk, group, num_warps, num_stages):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _gemm_launch(grid, a, b, a, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                 c.stride(1), BM=bm, BN=bn, BK=bk, GROUP=group, num_warps=num_warps, num_stages=num_stages)
    return c


def gemm_tma(a, w, bm, bn, bk, group, num_warps, num_stages):
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _gemm_tma[grid](_desc(a, bm, bk), _desc(w, bn, bk), a, c, M, N, K, 0, 0, 0, 0, c.stride(0), c.stride(1),
                    BM=bm, BN=bn, BK=bk, GROUP=group, num_warps=num_warps, num_stages=num_stages)
    return c
"""


def gemm_module(directory: Path) -> ModuleType:
    """The Triton GEMM template (no epilogue) rendered into ``directory/triton_gemm_bench.py`` and imported:
    ``gemm(a, b, bm, bn, bk, group, num_warps, num_stages) -> a @ b`` (a file, as Triton reads kernels' source),
    ``gemm_tma(a, w, ...) -> a @ w.t()``, its tensor-descriptor form, for a weight ``w`` [N, K] as stored, and
    ``gemm_persistent(a, w, ..., subtile, warp_specialize)``, the persistent kernel (``kernels/gemm_persistent.py``),
    and ``split_for``/``gemm_split``, the GEMM family's split-K launch (``kernels/gemm_split_host.py``)."""
    path = directory / "triton_gemm_bench.py"
    path.write_text(GEMM_SOURCE.format(kernel=triton_gemm_kernel("_gemm", []), launcher=triton_launcher(),
                                       tma_kernel=triton_gemm_kernel("_gemm_tma", [], tma=True),
                                       descriptors=TMA_DESCRIPTORS,
                                       persistent=kernel_source("gemm_act.py") + kernel_source("gemm_persistent.py"),
                                       split_kernel=triton_gemm_kernel("_gemm_split", [], split_k=True,
                                                                       sum_in_launch=True, tma=True),
                                       fit=FIT_TILES, counters=TRITON_ARRIVAL_COUNTERS,
                                       split_host=kernel_source("gemm_split_host.py")))
    spec = importlib.util.spec_from_file_location("triton_gemm_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def operands(s: Shape, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B of ``s`` laid out as the reference had them, values giving products of about unit size."""
    dtype = {v: k for k, v in DTYPES.items()}[s.dtype]

    def matrix(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:
            return torch.randn(cols, rows, device=device, dtype=dtype).t()
        return torch.randn(rows, cols, device=device, dtype=dtype)

    return matrix(s.m, s.k, s.a_t), matrix(s.k, s.n, s.b_t).mul_(s.k**-0.5)


def matches(got: torch.Tensor, want: torch.Tensor, tolerance: float = TOLERANCE) -> bool:
    """``got`` within ``tolerance`` of ``want`` (fp32) relative to the largest |value| of ``want``."""
    if got.shape != want.shape:
        return False
    err = (got.float() - want).abs().max().item()
    return err <= tolerance * max(want.abs().max().item(), 1e-6)


def persistent_name(t: tuple) -> str:
    *tile, subtile, warp_specialize = t
    return f"persistent {tile_name(tuple(tile))[7:]}" + " subtile" * subtile + " ws" * warp_specialize


def tile_name(t: tuple[int, ...]) -> str:
    bm, bn, bk, group, warps, stages = t
    return f"triton {bm}x{bn}x{bk} g{group} w{warps} s{stages}"


def candidates(s: Shape, kernels: ModuleType, a: torch.Tensor, b: torch.Tensor,
               cuda_gemvs: dict[str, Callable] | None = None) -> dict[str, Callable[[], Any]]:
    """Name -> a call of our kernels that computes ``a @ b``: the tile grid, through pointers and, where both
    operands can have tensor descriptors (B a weight [N, K] as stored), through them; and the GEMVs (Triton, and
    the CUDA C++ ones of ``cuda_gemvs``) where they serve."""
    tiles = SMALL_M_TILES if s.m <= SMALL_M else LARGE_TILES
    out = {tile_name(t): (lambda t=t: kernels.gemm(a, b, *t)) for t in tiles}
    w = b.t()  # the GEMV and the descriptor form read the weight as [N, K]: only where that is B's own layout
    if s.m > SMALL_M and kernels._tma_ready(a, w):
        out.update({f"{tile_name(t)} tma": (lambda t=t: kernels.gemm_tma(a, w, *t)) for t in tiles})
        if (s.n * a.element_size()) % 16 == 0:  # the output's rows too, for its descriptor
            out.update({persistent_name(t): (lambda t=t: kernels.gemm_persistent(a, w, *t)) for t in PERSISTENT})
            split = kernels.split_for(a, w)
            if split > 1:
                out[f"split-K {split} 64x128x64"] = lambda: kernels.gemm_split(a, w, split)
    if s.m <= SMALL_M and not s.a_t and w.stride(1) == 1 and takes(a, w, None):
        out.update({f"gemv {bn}x{bk} w{warps}": (lambda bn=bn, bk=bk, warps=warps: gemv(a, w, None, bn, bk, warps))
                    for bn, bk, warps in _BLOCKS})  # fmt: skip
    if s.m <= CUDA_GEMV_M and not s.a_t and w.stride(1) == 1 and a.is_contiguous():
        out.update({name: (lambda fn=fn: fn(a, w)) for name, fn in (cuda_gemvs or {}).items()})
    return out


@dataclass
class Row:
    shape: Shape
    problems: list[str]
    cublas_us: float = math.nan
    ours_us: float = math.nan
    ours: str = ""  # the fastest matching candidate
    times_us: dict[str, float | None] = field(default_factory=dict)  # None: failed or did not match
    notes: list[str] = field(default_factory=list)

    @property
    def pct(self) -> float:
        return 100 * self.cublas_us / self.ours_us if self.ours_us > 0 else math.nan

    def tflops(self, us: float) -> float:
        s = self.shape
        return 2 * s.m * s.n * s.k / (us * 1e6) if us > 0 else math.nan

    def record(self) -> dict[str, Any]:
        return {**asdict(self.shape), "layout": self.shape.layout, "group": self.shape.group, **{
            k: v for k, v in asdict(self).items() if k != "shape"}, "pct_of_cublas": self.pct,
            "tflops_cublas": self.tflops(self.cublas_us), "tflops_ours": self.tflops(self.ours_us)}  # fmt: skip


def measure(s: Shape, problems: list[str], kernels: ModuleType, device: torch.device, timer: str, preroll_us: float,
            iterations: int, cuda_gemvs: dict[str, Callable] | None = None) -> Row:
    """cuBLAS and every candidate of one shape, each checked against an fp32 matmul before it is timed."""
    row = Row(s, problems)
    a, b = operands(s, device)
    want = torch.matmul(a.float(), b.float())

    def timed(fn: Callable[[], Any]) -> float:
        stats = time_callable(fn, device, iterations=iterations, preroll_us=preroll_us, timer=timer)
        return stats.median_ms * 1e3

    if not matches(torch.matmul(a, b), want):
        row.notes.append("cuBLAS itself off the fp32 product")
    row.cublas_us = timed(lambda: torch.matmul(a, b))
    for name, fn in candidates(s, kernels, a, b, cuda_gemvs).items():
        row.times_us[name] = None
        try:
            if matches(fn(), want):
                row.times_us[name] = timed(fn)
            else:
                row.notes.append(f"{name}: wrong result")
        except Exception as e:  # noqa: BLE001 - a tile that does not fit or compile is a note, the others go on
            row.notes.append(f"{name}: {failure_line(e, 160)}")
    ok = {k: v for k, v in row.times_us.items() if v is not None}
    if ok:
        row.ours = min(ok, key=ok.get)
        row.ours_us = ok[row.ours]
    return row


def short(names: list[str], keep: int = 2, width: int = 28) -> str:
    cut = [n if len(n) <= width else n[: width - 1] + "…" for n in names[:keep]]
    return ", ".join(cut) + (f" +{len(names) - keep}" if len(names) > keep else "")


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def summary(rows: list[Row]) -> list[str]:
    groups = (("small", f"M <= {SMALL_M}", 100.0), ("large", f"M > {SMALL_M} (large: M*N*K >= 2^30)", LARGE_BAR),
              ("other", f"M > {SMALL_M}, M*N*K < 2^30", None))  # fmt: skip
    out = []
    for key, title, bar in groups:
        pcts = [r.pct for r in rows if r.shape.group == key]
        if not pcts:
            continue
        measured = [p for p in pcts if p == p]
        line = (f"- {title}: {len(pcts)} shapes, geomean {geomean(measured):.1f}% of cuBLAS, "
                f"min {min(measured, default=math.nan):.1f}%")  # fmt: skip
        if bar is not None:
            line += f"; at or above {bar:.0f}%: {sum(p >= bar for p in measured)} of {len(pcts)}"
        if len(measured) < len(pcts):
            line += f" ({len(pcts) - len(measured)} with no matching kernel)"
        out.append(line)
    return out


def table(rows: list[Row], title: str) -> list[str]:
    lines = [title, "", *summary(rows), "",
             "| M | N | K | dtype | layout | problems | cuBLAS µs | ours µs (kernel) | % of cuBLAS | cuBLAS TFLOP/s "
             "| ours TFLOP/s |", "|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        s = r.shape
        lines.append(f"| {s.m} | {s.n} | {s.k} | {s.dtype} | {s.layout} | {short(r.problems)} | {r.cublas_us:.2f} | "
                     f"{r.ours_us:.2f} ({r.ours or 'none'}) | {r.pct:.1f}% | {r.tflops(r.cublas_us):.1f} | "
                     f"{r.tflops(r.ours_us):.1f} |")  # fmt: skip
    notes = [f"- {r.shape.m}x{r.shape.n}x{r.shape.k} {r.shape.dtype}: {n}" for r in rows for n in r.notes]
    return lines + (["", "Skipped candidates:", "", *notes] if notes else [])


def shape_lines(shapes: dict[Shape, list[str]]) -> list[str]:
    counts = Counter(s.group for s in shapes)
    lines = [f"{len(shapes)} distinct shapes: M <= {SMALL_M}: {counts['small']}, large: {counts['large']}, "
             f"other: {counts['other']}", "", "| M | N | K | dtype | layout | problems |",
             "|---:|---:|---:|---|---|---|"]  # fmt: skip
    return lines + [f"| {s.m} | {s.n} | {s.k} | {s.dtype} | {s.layout} | {short(p)} |" for s, p in shapes.items()]


def main() -> int:
    ap = problems_parser(__doc__)
    ap.add_argument("--workloads", type=int, default=3, help="workloads per problem, spread smallest to largest")
    ap.add_argument("--max-shapes", type=int, default=0, help="time only the first N shapes, by M, N, K (0: all)")
    ap.add_argument("--groups", default="small,large,other",
                    help="which shapes to time: small (M <= 64), large (M*N*K >= 2^30), other; comma-separated")
    ap.add_argument("--collect-only", action="store_true", help="list the shapes (no GPU needed) and stop")
    ap.add_argument("--timer", choices=TIMERS, default="events")
    ap.add_argument("--preroll-us", type=float, default=100.0)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--cuda-gemv", action=argparse.BooleanOptionalAction, default=True,
                    help="build the CUDA C++ GEMV template's variants (nvcc) and time them at M <= 16")
    ap.add_argument("--build-jobs", type=int, default=8)
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--json-out", type=Path, help="also write one JSON object per shape here")
    args = ap.parse_args()
    start = time.monotonic()
    shapes = collect_shapes(args.problems, args.workloads, log=lambda msg: print(msg, flush=True))
    print(f"collected {len(shapes)} shapes in {time.monotonic() - start:.1f} s", flush=True)
    groups = set(args.groups.split(","))
    if groups - {"small", "large", "other"}:
        ap.error(f"--groups: unknown {sorted(groups - {'small', 'large', 'other'})}")
    shapes = {s: p for s, p in shapes.items() if s.group in groups}
    if args.max_shapes:
        shapes = dict(list(shapes.items())[: args.max_shapes])
    if args.collect_only:
        emit_report(shape_lines(shapes), args.out)
        return 0
    device = torch.device(args.device)
    if device.type != "cuda":
        ap.error("timing needs a CUDA device (--collect-only does not)")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gemm-vs-cublas-") as tmp:
        kernels = gemm_module(Path(tmp))
        gemvs = {}
        if args.cuda_gemv and any(s.m <= CUDA_GEMV_M for s in shapes):
            from cuda_gemv_bench import cuda_gemvs

            t0 = time.monotonic()
            gemvs = cuda_gemvs(str(device), REPO / "kernels_tmp", jobs=args.build_jobs)
            print(f"built {len(gemvs)} CUDA GEMV variants in {time.monotonic() - t0:.0f} s", flush=True)
        for i, (s, problems) in enumerate(shapes.items(), 1):
            try:
                row = measure(s, problems, kernels, device, args.timer, args.preroll_us, args.iterations, gemvs)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory: the shape is a row with its reason
                row = Row(s, problems, notes=[f"not measured: {failure_line(e, 160)}"])
            rows.append(row)
            print(f"[{i}/{len(shapes)}] {s.m}x{s.n}x{s.k} {s.dtype} {s.layout}: cuBLAS {row.cublas_us:.2f} µs, "
                  f"ours {row.ours_us:.2f} µs ({row.ours or 'none'}) = {row.pct:.1f}%", flush=True)
            if args.json_out:  # rewritten after every shape: a run cut by a time limit keeps what it measured
                args.json_out.parent.mkdir(parents=True, exist_ok=True)
                args.json_out.write_text("".join(json.dumps(r.record()) + "\n" for r in rows))
            torch.cuda.empty_cache()
    title = (f"bf16/fp16 GEMM, our kernels vs cuBLAS on {torch.cuda.get_device_name(device)} ({args.timer} timer, "
             f"{args.preroll_us:.0f} µs pre-roll), {time.strftime('%Y-%m-%d %H:%M')}")  # fmt: skip
    emit_report(table(rows, title), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
