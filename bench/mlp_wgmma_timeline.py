"""Where a CUDA MLP call's time goes, CTA by CTA: the weight-stationary kernels (mlp_wgmma.py) built
with their timeline probes (``MLPWG_TRACE``) and run after the judge's L2 flush.

Each CTA stamps its SM clock at entry, after the cluster barrier, when the producer starts and ends issuing
loads, when each K step's stage lands (up to 16), when its MMAs are done, when the tile is staged, stored, and
at exit; entry and exit also read the global nanosecond timer, which places CTAs and the two launches on one
axis. The table gives, per launch, the median and the worst CTA of each phase in ns (SM cycles converted with
each CTA's own cycles-per-ns over its lifetime), over ``--runs`` calls.

    python bench/mlp_wgmma_timeline.py --params '{"cluster": 1}' --runs 5 -o /tmp/timeline.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import torch  # noqa: E402

from agents.offline.templates import build_solution  # noqa: E402
from sol_bench.inputs import output_specs  # noqa: E402
from sol_bench.models import Solution, SourceFile  # noqa: E402
from sol_bench.problem import load_problem  # noqa: E402
from sol_bench.timing import L2Flusher  # noqa: E402

MLP = REPO / "data" / "problems" / "L2" / "mlp_gelu_exact_k768_i3072_n768_tok197_bf16"
SLOTS, CTAS = 32, 512
ENTRY, CLUSTER, LOADS_START, LOADS_END, STEP0, MMA_DONE, STAGED, STORED, EXIT = 0, 1, 2, 3, 4, 20, 21, 22, 23
GT_ENTRY, GT_EXIT, SMID = 28, 29, 30

TRACE_HOST = """
void mlpwg_trace(at::Tensor out, bool clear) {
  TORCH_CHECK(out.device().is_cpu() && out.scalar_type() == at::kLong && out.numel() == 2 * 512 * 32 && out.is_contiguous());
  if (clear) {
    void* dev = nullptr;
    C10_CUDA_CHECK(cudaGetSymbolAddress(&dev, mlpwg::trace_buf));
    C10_CUDA_CHECK(cudaMemset(dev, 0, sizeof(mlpwg::trace_buf)));
  } else {
    C10_CUDA_CHECK(cudaMemcpyFromSymbol(out.data_ptr(), mlpwg::trace_buf, sizeof(mlpwg::trace_buf)));
  }
}
"""


def traced_solution(sol: Solution) -> Solution:
    """``sol`` with the probes compiled in and ``mlpwg_trace(out, clear)`` bound next to ``run``."""
    files = []
    for f in sol.sources:
        text = f.content
        if f.path == "kernel.cu":
            text = "#define MLPWG_TRACE 1\n" + text + TRACE_HOST
        elif f.path == "binding.cpp":
            text = text.replace("PYBIND11_MODULE", "void mlpwg_trace(at::Tensor out, bool clear);\n\nPYBIND11_MODULE")
            text = text.replace('m.def("run", &run);', 'm.def("run", &run); m.def("mlpwg_trace", &mlpwg_trace);')
        files.append(SourceFile(path=f.path, content=text))
    return sol.model_copy(update={"sources": files, "name": sol.name + "_traced"})


def phases(rows: torch.Tensor, t0: int) -> dict[str, list[float]]:
    """Per phase, the ns of each CTA that stamped: rows [CTAS, SLOTS] of one launch; t0 the call's first entry."""
    out: dict[str, list[float]] = {}
    for r in rows.tolist():
        if r[ENTRY] == 0 or r[EXIT] == 0:
            continue
        ns_per_cycle = (r[GT_EXIT] - r[GT_ENTRY]) / max(r[EXIT] - r[ENTRY], 1)
        steps = [r[STEP0 + i] for i in range(16) if r[STEP0 + i]]

        def add(name: str, value: float) -> None:
            out.setdefault(name, []).append(value)

        add("entry after first CTA", r[GT_ENTRY] - t0)
        add("exit after first CTA", r[GT_EXIT] - t0)
        add("entry -> cluster barrier", (r[CLUSTER] - r[ENTRY]) * ns_per_cycle)
        add("cluster barrier -> first stage landed", (steps[0] - r[CLUSTER]) * ns_per_cycle if steps else 0.0)
        if len(steps) > 1:
            add("K step interval (mean)", (steps[-1] - steps[0]) / (len(steps) - 1) * ns_per_cycle)
            add("K step interval (max)", max(b - a for a, b in zip(steps, steps[1:])) * ns_per_cycle)
        if r[LOADS_END]:
            add("producer: loads issued", (r[LOADS_END] - r[LOADS_START]) * ns_per_cycle)
        add("last stage landed -> MMAs done", (r[MMA_DONE] - steps[-1]) * ns_per_cycle if steps else 0.0)
        add("staging the tile", (r[STAGED] - r[MMA_DONE]) * ns_per_cycle)
        add("stores / reductions", (r[STORED] - r[STAGED]) * ns_per_cycle)
        add("stored -> exit (cluster barrier)", (r[EXIT] - r[STORED]) * ns_per_cycle)
        add("CTA lifetime", r[GT_EXIT] - r[GT_ENTRY])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", type=Path, nargs="?", default=MLP)
    ap.add_argument("--params", type=json.loads, default={}, help="laid over the renderer's first variant")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--staging-root", type=Path, default=REPO / "kernels_tmp")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    from launch_profile import load_module
    from template_sweep import renderer_for, workload_inputs

    device = torch.device("cuda")
    problem = load_problem(a.problem)
    problem = problem.select(problem.smallest_workloads(1))
    fam, binding, renderer = renderer_for(problem, "mlp", "cuda_cpp")
    params = {**renderer.variants()[0], **a.params}
    module = load_module(traced_solution(build_solution(problem, fam.name, renderer, binding, params)), "cuda",
                         a.staging_root)  # fmt: skip
    _, inputs = workload_inputs(problem, device)
    sol_spec = build_solution(problem, fam.name, renderer, binding, params).spec
    if sol_spec.destination_passing_style:
        inputs += [torch.empty(shape, dtype=dt, device=device)
                   for shape, dt in output_specs(problem.definition, problem.workloads[0]).values()]  # fmt: skip
    flusher = L2Flusher(device)
    buf = torch.zeros(2 * CTAS * SLOTS, dtype=torch.long)
    per_launch: list[dict[str, list[float]]] = [{}, {}]
    with torch.no_grad():
        for _ in range(3):
            module.run(*inputs)
        for _ in range(a.runs):
            module.mlpwg_trace(buf, True)
            flusher.flush()
            torch.cuda.synchronize(device)
            module.run(*inputs)
            torch.cuda.synchronize(device)
            module.mlpwg_trace(buf, False)
            rows = buf.view(2, CTAS, SLOTS)
            stamped = rows[..., GT_ENTRY][rows[..., ENTRY] != 0]
            t0 = int(stamped.min())
            for launch in range(2):
                for k, v in phases(rows[launch], t0).items():
                    per_launch[launch].setdefault(k, []).extend(v)
    lines = [f"# CUDA MLP timeline: {problem.name}", "", f"Params: `{json.dumps(params)}`, {a.runs} calls after an L2 "
             "flush; ns per CTA (median, worst) over every CTA of every call.", "",
             "| phase | up median | up worst | down median | down worst |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    names = list(dict.fromkeys([*per_launch[0], *per_launch[1]]))
    for name in names:
        cells = []
        for launch in range(2):
            xs = per_launch[launch].get(name, [])
            cells += [f"{statistics.median(xs):.0f}", f"{max(xs):.0f}"] if xs else ["–", "–"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sms = {int(x) for x in buf.view(2, CTAS, SLOTS)[..., SMID][buf.view(2, CTAS, SLOTS)[..., ENTRY] != 0].tolist()}
    lines += ["", f"CTAs of the last call on {len(sms)} distinct SMs."]
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
