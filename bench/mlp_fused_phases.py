"""Time the fused MLP's two phases apart: the up projection's tiles, then the down projection's slices.

The one-launch file (``fused``, agents/offline/templates/mlp_fused.py) is rendered with ``one_launch`` False, so
``run`` launches ``_mlp_fused`` twice (PHASE 1, PHASE 2); this script records both launches and times each
alone with the judge's protocol (``sol_bench.timing.time_callable``: L2 flush, ``--timer``), phase 2 after an
untimed phase 1 (its counters need one). Phase 2 is timed twice: after the flush (the hidden activations
written back to HBM, an upper bound) and without it (they stay in L2, as in one launch). The one-launch file
is timed whole for comparison. Trusted code (our own template), loaded as the sweep loads it (``launch_profile.load_candidate``).

    python bench/mlp_fused_phases.py data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16 \\
        --params '{"split": 4, "per_sm": 1}' --device cuda --timer cupti
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402

from agents.offline.graph import trace_ops  # noqa: E402
from agents.offline.templates import FAMILIES, build_solution  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.problem import load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
from sol_bench.timing import TIMERS, time_callable  # noqa: E402


class _Recorder:
    """Stands in for the file's ``_mlp_fused``: launches through the real kernel and keeps each launch."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def warmup(self, *args, **kwargs):
        return self.kernel.warmup(*args, **kwargs)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((grid, args, kwargs))
            return self.kernel[grid](*args, **kwargs)

        return launch


def _entry(problem, params, device, staging: Path):
    """The rendered file's ``run`` (loaded from a file: Triton reads the kernels' source); its globals are the
    file's module."""
    from launch_profile import load_candidate

    fam = next(f for f in FAMILIES if f.name == "mlp")
    renderer = next(r for r in fam.renderers if r.language == "triton")
    binding = fam.match(problem, trace_ops(problem))[0]
    sol = build_solution(problem, fam.name, renderer, binding, {**renderer.variants()[0], **params, "graph": False})
    return load_candidate(sol, device, staging)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--params", default="{}", help="JSON laid over the MLP renderer's first (fused) variant")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timer", default="events", choices=TIMERS)
    ap.add_argument("--iterations", type=int, default=50)
    args = ap.parse_args(argv)
    problem = load_problem(args.problem)
    params = {"fused": True, **json.loads(args.params)}
    ref = load_reference(problem.definition)
    w = problem.workloads[0]
    inputs = list(make_inputs(problem.definition, w, args.device, 1234, ref).values())
    out = [torch.empty(s, dtype=t, device=args.device) for s, t in output_specs(problem.definition, w).values()]
    expected = ref.run(*inputs)

    def timed(fn, **kw):
        return time_callable(fn, args.device, iterations=args.iterations, timer=args.timer, **kw).median_ms * 1e3

    staging = Path(tempfile.mkdtemp(prefix="fused_phases_"))
    whole = _entry(problem, {**params, "one_launch": True}, args.device, staging / "one")
    whole(*inputs, *out)
    torch.testing.assert_close(out[0].float(), expected.float(), atol=2e-2, rtol=2e-2)
    rows = [("one launch", timed(lambda: whole(*inputs, *out)))]
    split = _entry(problem, {**params, "one_launch": False}, args.device, staging / "two")
    rec = split.__globals__["_mlp_fused"] = _Recorder(split.__globals__["_mlp_fused"])
    split(*inputs, *out)
    torch.testing.assert_close(out[0].float(), expected.float(), atol=2e-2, rtol=2e-2)
    (g1, a1, k1), (g2, a2, k2) = rec.launches[:2]

    def up():
        rec.kernel[g1](*a1, **k1)

    def down():
        rec.kernel[g2](*a2, **k2)

    rows.append(("two launches", timed(lambda: split(*inputs, *out))))
    rows.append(("phase 1 (up)", timed(up)))
    rows.append(("phase 2 (down), flushed", timed(down, before_each=up)))
    rows.append(("phase 2 (down), in L2", timed(down, before_each=up, flush_l2=False)))
    print(f"programs {g1[0]}, params {json.dumps(params)}")
    for name, us in rows:
        print(f"{name:28s} {us:8.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
