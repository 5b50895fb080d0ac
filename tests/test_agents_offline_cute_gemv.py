"""The GEMM family's CuTe DSL GEMV: planned for linear problems with decode-shaped workloads, rendered with the
binding's bias and activation, and compiled to sm_90a device code on this CPU machine (fake tensors,
``CUTE_DSL_ARCH=sm_90a`` in a subprocess) with the loads the design promises. Its numbers are checked on a GPU."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agents.offline.agent import plan
from agents.offline.templates.base import Binding
from agents.offline.templates.gemv_cuda import SMALL_M
from agents.offline.templates.matmul import GEMM
from sol_bench.problem import load_problem

REPO = Path(__file__).resolve().parents[1]
LINEARS = sorted((REPO / "data" / "problems" / "L1").glob("linear_*"))
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")


def _cute(problem_dir: Path):
    return [c for c in plan(load_problem(problem_dir), "cuda:0") if c.group.startswith("gemm/cute_dsl")]


def _constants(src: str) -> dict[str, object]:
    return {m[1]: eval(m[2]) for m in re.finditer(r"^(THREADS|HAS_BIAS|ACT|MAX_ROWS) = (.+?)(?:  #.*)?$", src, re.M)}


def test_planned_where_the_family_binds_and_some_workload_is_decode_shaped_and_never_on_the_cpu():
    seen = 0
    for d in LINEARS:
        groups = [c.group for c in plan(load_problem(d), "cuda:0")]
        bound = any(g.startswith("gemm/") for g in groups)  # too large to probe on the CPU: no binding
        cute = "gemm/cute_dsl/0" in groups
        assert cute == (bound and min(_rows(d)) <= SMALL_M), d.name
        if cute:
            seen += 1
            assert groups.index("gemm/cute_dsl/0") > groups.index("gemm/triton/0")
            assert not any(c.group.startswith("gemm/cute_dsl") for c in plan(load_problem(d), "cpu"))
    assert seen >= 3


def _rows(d: Path) -> list[int]:
    """Rows (all dims but the last) of the activation per workload: the input whose rows change between them."""
    p = load_problem(d)
    defn = p.definition
    per_input = [[math.prod(s.concrete_shape(defn.resolve_axes(w.axes))[:-1]) for w in p.workloads]
                 for s in defn.inputs.values() if s.shape and len(s.shape) >= 2]  # fmt: skip
    (rows,) = [r for r in per_input if len(set(r)) > 1]
    return rows


def test_rendered_constants_follow_the_binding_and_the_row_bound_is_the_familys():
    d = next(d for d in LINEARS if "bias" in d.name and _cute(d))
    (first, *_) = _cute(d)
    src = first.solution.sources[0].content
    k = _constants(src)
    assert k == {"THREADS": first.params["threads"], "HAS_BIAS": True, "ACT": 0, "MAX_ROWS": SMALL_M}
    assert f"\ndef run({', '.join([*load_problem(d).definition.inputs, *load_problem(d).definition.outputs])}):" in src
    r = next(r for r in GEMM.renderers if r.language == "cute_dsl")
    p = load_problem(d)
    b = Binding({"a": "x", "b": "weight"}, {"act": "silu", "b_is_nk": True, "min_m": 1, "max_m": 1})
    src = r.sources(p, b, {"threads": 256})["kernel.py"]
    assert _constants(src) == {"THREADS": 256, "HAS_BIAS": False, "ACT": 3, "MAX_ROWS": SMALL_M}
    assert "_gemv(x, weight, None, y)" in src
    assert not r.accepts(Binding({"a": "x", "b": "weight"}, {"act": None, "b_is_nk": False, "min_m": 1}))
    assert not r.accepts(Binding({"a": "x", "b": "weight"}, {"act": None, "b_is_nk": True, "min_m": SMALL_M + 1}))


# ------------------------------------------------------------------------------------- sm_90a compile


def _compile_main(jobs_json: str) -> None:
    """Subprocess side: compile each job's kernel file with fake tensors; print PTX facts as JSON."""
    import cuda.bindings.driver as cuda
    import cutlass
    from cutlass.cute.runtime import make_fake_compact_tensor

    out = []
    for job in json.loads(jobs_json):
        spec = importlib.util.spec_from_file_location(f"cand{len(out)}", job["path"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        m, k, n, vec = job["m"], job["k"], job["n"], job["vectorised"]
        align = 16 if vec else 2
        dt = cutlass.BFloat16
        a = make_fake_compact_tensor(dt, (m, k), stride_order=(1, 0), assumed_align=align)
        w = make_fake_compact_tensor(dt, (n, k), stride_order=(1, 0), assumed_align=align)
        b = make_fake_compact_tensor(dt, (n,), assumed_align=2)
        y = make_fake_compact_tensor(dt, (m, n), stride_order=(1, 0), assumed_align=2)
        threads = mod.threads_for(k, 8 if vec else 1)
        ptx = mod.compile_gemv(a, w, b, y, cuda.CUstream(0), vec, threads, options="--keep-ptx").artifacts.PTX
        count = lambda pat: len(re.findall(pat, ptx, re.M))  # noqa: E731
        out.append({
            "threads": threads,
            "sm_90a": count(r"^\.target sm_90a"),
            "entries": count(r"\.entry kernel_\w*gemv_kernel"),
            "ld_v4": count(r"ld\.global(?:\.\w+)*\.v4\.b32"),
            "ld_b16": count(r"ld\.global(?:\.\w+)*\.(?:b16|u16)\b"),
            "shfl_bfly": count(r"shfl\.sync\.bfly"),
            "bar": count(r"bar(?:rier)?\.sync"),
        })  # fmt: skip
    print(json.dumps(out))


def _compile(jobs: list[dict], tmp_path: Path) -> list[dict]:
    res = subprocess.run(
        [sys.executable, __file__, json.dumps(jobs)], cwd=tmp_path, env={**os.environ, "CUTE_DSL_ARCH": "sm_90a"},
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _render(tmp_path: Path, act: str | None, bias: bool, threads: int) -> str:
    d = next(d for d in LINEARS if "bias" in d.name)
    r = next(r for r in GEMM.renderers if r.language == "cute_dsl")
    roles = {"a": "x", "b": "weight", **({"bias": "bias"} if bias else {})}
    src = r.sources(load_problem(d), Binding(roles, {"act": act, "b_is_nk": True, "min_m": 1}), {"threads": threads})
    path = tmp_path / f"gemv_{act}_{bias}_{threads}.py"
    path.write_text(src["kernel.py"], encoding="utf-8")
    return str(path)


def test_each_row_of_a_reads_the_weight_once_in_16_byte_vectors(tmp_path):
    shapes = [(1, 4096, 4096, "gelu", True, 128), (4, 3584, 512, None, False, 256), (16, 8192, 1024, "relu", True, 128),
              (2, 65536, 64, "silu", False, 128), (3, 1024, 96, "tanh", True, 128)]  # fmt: skip
    jobs = [{"path": _render(tmp_path, act, bias, th), "m": m, "k": k, "n": n, "vectorised": True}
            for m, k, n, act, bias, th in shapes]  # fmt: skip
    for (m, k, _, _, bias, th), f in zip(shapes, _compile(jobs, tmp_path), strict=True):
        threads = max(th, -(-(-(-(k // 8) // 16)) // 32) * 32)  # more threads where a row needs over 16 vectors each
        vpt = -(-(k // 8) // threads)
        assert f["threads"] == threads and f["sm_90a"] == 1 and f["entries"] == 1, f
        # the thread's weight vectors once, then its vectors of each row of a: all 16-byte loads
        assert f["ld_v4"] == vpt * (1 + m) and f["ld_b16"] == int(bias), (m, k, f)  # the bias: one 2-byte load
        assert f["shfl_bfly"] == 5 * m and f["bar"] >= 1, f


def test_unaligned_rows_take_element_loads(tmp_path):
    job = {"path": _render(tmp_path, None, False, 128), "m": 2, "k": 1000, "n": 64, "vectorised": False}
    (f,) = _compile([job], tmp_path)
    assert f["entries"] == 1 and f["ld_v4"] == 0 and f["ld_b16"] == 3 * -(-1000 // 128), f


@pytest.mark.parametrize("act", [None, "relu", "gelu", "silu", "tanh"])
def test_calls_of_more_rows_than_the_gemv_takes_compute_what_the_reference_does(tmp_path, act):
    import torch

    spec = importlib.util.spec_from_file_location(f"gemv_{act}", _render(tmp_path, act, True, 128))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = torch.Generator().manual_seed(0)
    a, w, bias = (torch.randn(*s, generator=g).to(torch.bfloat16) for s in ((mod.MAX_ROWS + 1, 64), (48, 64), (48,)))
    y = torch.empty(mod.MAX_ROWS + 1, 48, dtype=torch.bfloat16)
    mod._gemv(a, w, bias, y)
    want = torch.nn.functional.linear(a, w, bias)
    want = {None: want, "relu": torch.relu(want), "gelu": torch.nn.functional.gelu(want),
            "silu": torch.nn.functional.silu(want), "tanh": torch.tanh(want)}[act]  # fmt: skip
    assert torch.equal(y, want)


if __name__ == "__main__":
    _compile_main(sys.argv[1])
