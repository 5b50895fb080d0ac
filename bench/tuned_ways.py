"""`bench/tuned_ways.py`: what the tuned reference (``agents/offline/tuned.py``) measures of each of its ways on
a problem's workloads (on a GPU with the families' way where families are found in it), which way it keeps,
and, on a GPU, each way's time outside the judge (the judge's CUPTI window through
``sol_bench.timing.time_callable``, and the kernels torch.profiler records). Run in this process on fresh
buffers: a gap between these times and the judged T_k is in how the judge runs the candidate, not in the choice.

    python bench/tuned_ways.py kernels_tmp/fresh/L1/gen_gelu_exact_f4096_bf16 --device cuda
    python bench/tuned_ways.py tests/fixtures/problems/rmsnorm_small --device cpu   (a CPU check)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.offline import compiled  # noqa: E402
from agents.offline.graph import trace_ops  # noqa: E402
from agents.offline.subgraph import solution as subgraph_solution  # noqa: E402
from sol_bench.inputs import make_inputs, output_specs  # noqa: E402
from sol_bench.problem import WORKLOAD_PICKS, load_problem  # noqa: E402
from sol_bench.reference import load_reference  # noqa: E402
from sol_bench.timing import time_callable  # noqa: E402


def load_candidate(solution) -> types.ModuleType:
    """The tuned candidate's module, importable by name (Dynamo looks its globals up through sys.modules)."""
    name = f"tuned_ways_{abs(hash(solution.name))}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    staged = tempfile.mkdtemp(prefix="tuned_ways_")
    for src in solution.sources[1:]:
        (Path(staged) / src.path).parent.mkdir(parents=True, exist_ok=True)
        (Path(staged) / src.path).write_text(src.content)
    sys.path.insert(0, staged)
    exec(compile(solution.sources[0].content, "kernel.py", "exec"), module.__dict__)
    return module


def kernels(call) -> list[tuple[str, float]]:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return [(e.name[:60], round(e.device_time_total, 1)) for e in prof.events() if e.device_time_total > 0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workloads", type=int, default=3)
    ap.add_argument("--pick", choices=WORKLOAD_PICKS, default="spread")
    args = ap.parse_args()
    gpu = args.device.startswith("cuda")
    problem = load_problem(args.problem)
    problem = problem.select(problem.pick_workloads(args.workloads, args.pick))
    # the families' way, as the agent plans it
    families = subgraph_solution.families_way(subgraph_solution.find(problem)) if gpu else None
    search = gpu and compiled.inductor_search_pays(trace_ops(problem))
    module = load_candidate(compiled.tuned_solution(problem, gpu, families, search))
    tuned, reference = module._tuned, load_reference(problem.definition)
    for w in problem.workloads:
        inputs = list(make_inputs(problem.definition, w, args.device, 3, reference).values())
        outputs = [torch.empty(s, dtype=t, device=args.device) for s, t in output_specs(problem.definition, w).values()]
        call_args = (*inputs, *outputs) if gpu else tuple(inputs)
        module.solforge_entry(*call_args)
        key = list(tuned.measured)[-1]
        measured = {k: (f"{v:.4f} ms" if isinstance(v, float) else v) for k, v in tuned.measured[key].items()}
        print(f"{w.uuid} {w.axes}: keeps {tuned.ways[tuned.picks[key]].name}; first call measured {measured}")
        if not gpu:
            continue
        for way in tuned.ways:
            try:
                way.call(call_args)
            except Exception as e:  # noqa: BLE001 - a way that fails is reported, the others still run
                print(f"  {way.name}: raises {type(e).__name__}: {e}")
                continue
            timed = time_callable(lambda: way.call(call_args), args.device, warmup=3, iterations=20, timer="cupti")
            ms = timed.median_ms
            print(f"  {way.name}: {ms:.4f} ms (CUPTI window); kernels {kernels(lambda: way.call(call_args))[:6]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
