"""The offline agent's CuTe DSL RMSNorm: planned after CUDA C++ and Triton, and every rendered variant of the
bundled RMSNorms compiles to sm_90a device code on this CPU machine (fake tensors, ``CUTE_DSL_ARCH=sm_90a`` in a
subprocess). Nothing here runs the kernel: its numbers are checked on a GPU only."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agents.offline.agent import plan
from agents.offline.templates.base import Binding
from agents.offline.templates.rmsnorm import FAMILY
from sol_bench.problem import load_problem

REPO = Path(__file__).resolve().parents[1]
RMSNORMS = sorted((REPO / "data" / "problems" / "L1").glob("rmsnorm_*"))
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")


def _cute_plans(problem_dir: Path):
    return [c for c in plan(load_problem(problem_dir), "cuda:0") if c.group.split("/")[1:2] == ["cute_dsl"]]


def _forward_rmsnorms() -> list[Path]:
    return [d for d in RMSNORMS if "bwd" not in d.name]


def test_the_offline_agent_plans_cute_after_cuda_and_triton_on_a_gpu_only():
    d = _forward_rmsnorms()[0]
    p = load_problem(d)
    langs = [c.group.split("/")[1] for c in plan(p, "cuda:0") if c.group.startswith("rmsnorm/")]
    assert langs.count("cute_dsl") == 4  # cast_before_weight x threads
    last_other = max(i for i, lang in enumerate(langs) if lang in ("cuda_cpp", "triton"))
    assert min(i for i, lang in enumerate(langs) if lang == "cute_dsl") > last_other
    assert not any("cute_dsl" in c.group for c in plan(p, "cpu"))
    only = list(plan(p, "cuda:0", language="cute_dsl"))
    assert only and all(c.group == "rmsnorm/cute_dsl/0" for c in only)


def _constants(src: str) -> dict[str, object]:
    return {m[1]: eval(m[2]) for m in re.finditer(r"^(THREADS|HAS_WEIGHT|CAST_BEFORE_WEIGHT|WEIGHT_OFFSET) = (.+)$",
                                                   src, re.M)}  # fmt: skip


def test_rendered_files_set_the_bindings_options_and_call_with_the_problems_names():
    seen = {}
    for d in _forward_rmsnorms():
        p = load_problem(d)
        for c in _cute_plans(d):
            sol = c.solution
            assert sol.spec.entry_point == "kernel.py::run" and [s.path for s in sol.sources] == ["kernel.py"]
            src = sol.sources[0].content
            k = _constants(src)
            assert len(k) == 4 and k["THREADS"] == c.params["threads"]
            assert k["CAST_BEFORE_WEIGHT"] == c.params["cast_before_weight"] and k["HAS_WEIGHT"] is True
            args = ", ".join([*p.definition.inputs, *p.definition.outputs])
            assert f"\ndef run({args}):\n    _rmsnorm_rows(x, weight, y, eps)\n" in src
            seen[d.name] = k["WEIGHT_OFFSET"]
    # the probe keeps the offset the reference computes: Gemma's scale is an offset from one
    assert seen.pop("rmsnorm_unit_offset_fwd_h3072_eps6_bf16") == 1.0
    assert seen and set(seen.values()) == {0.0}


# ------------------------------------------------------------------------------------- sm_90a compile


def _ptx_facts(ptx: str) -> dict[str, int]:
    count = lambda pat: len(re.findall(pat, ptx, re.M))  # noqa: E731
    return {
        "sm_90a": count(r"^\.target sm_90a"),
        "entries": count(r"\.entry kernel_\w*rmsnorm_kernel"),
        "ld_v4": count(r"ld\.global(?:\.\w+)*\.v4\.b32"),
        "st_v4": count(r"st\.global(?:\.\w+)*\.v4\.b32"),
        "ld_b16": count(r"ld\.global(?:\.\w+)*\.(?:b16|u16)\b"),
        "shfl_bfly": count(r"shfl\.sync\.bfly"),
        "bar": count(r"bar(?:rier)?\.sync"),
        "rsqrt": count(r"rsqrt\.approx"),
        "st_shared": count(r"st\.shared"),
        "cvt_rn_bf16x2": count(r"cvt\.rn\.bf16x2\.f32"),
        "cvt_rn_bf16": count(r"cvt\.rn\.bf16\.f32"),
        "mul_bf16x2": count(r"mul(?:\.rn)?\.bf16x2"),
    }


def _compile_main(jobs_json: str) -> None:
    """Subprocess side: compile each rendered kernel.py with fake tensors; print PTX facts as JSON."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    dtypes = {"bfloat16": cutlass.BFloat16, "float16": cutlass.Float16, "float32": cutlass.Float32}
    out = []
    for job in json.loads(jobs_json):
        spec = importlib.util.spec_from_file_location(f"cand{len(out)}", job["path"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        dt, h, align = dtypes[job["dtype"]], job["n_cols"], 16 if job["vectorised"] else 2
        rows = cute.sym_int32()
        x = make_fake_compact_tensor(dt, (rows, h), stride_order=(1, 0), assumed_align=align)
        y = make_fake_compact_tensor(dt, (rows, h), stride_order=(1, 0), assumed_align=align)
        w = make_fake_compact_tensor(dt, (h,), assumed_align=align)
        fn = mod.compile_rmsnorm(x, w, y, cutlass.Float32(1e-6), cuda.CUstream(0), job["vectorised"],
                                 options="--keep-ptx --keep-cubin")  # fmt: skip
        art = fn.artifacts
        out.append({**_ptx_facts(art.PTX), "cubin_bytes": len(art.CUBIN or b"")})
    print(json.dumps(out))


def _compile_in_subprocess(jobs: list[dict], tmp_path: Path) -> list[dict[str, int]]:
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a"}
    res = subprocess.run(
        [sys.executable, __file__, json.dumps(jobs)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=280,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _jobs(tmp_path: Path, vectorised: bool) -> list[tuple[dict, dict]]:
    jobs = []
    for d in _forward_rmsnorms():
        p = load_problem(d)
        x = next(s for s in p.definition.inputs.values() if s.shape and len(s.shape) == 2)
        n_cols = int(p.definition.axes[x.shape[-1]].value)
        for i, c in enumerate(_cute_plans(d)):
            path = tmp_path / f"{d.name}_{i}.py"
            path.write_text(c.solution.sources[0].content, encoding="utf-8")
            job = {"path": str(path), "dtype": x.dtype, "n_cols": n_cols, "vectorised": vectorised}
            jobs.append((job, {**c.params, "n_cols": n_cols, "problem": d.name}))
    return jobs


def test_every_bundled_rmsnorm_variant_compiles_to_a_vectorised_sm90a_kernel(tmp_path):
    jobs = _jobs(tmp_path, vectorised=True)
    assert len(jobs) == 4 * len(_forward_rmsnorms())
    facts = _compile_in_subprocess([j for j, _ in jobs], tmp_path)
    for (_, meta), f in zip(jobs, facts, strict=True):
        nvec = meta["n_cols"] // 8  # bf16: 8 a 16-byte vector
        vpt = -(-nvec // meta["threads"])
        assert f["sm_90a"] == 1 and f["entries"] == 1 and f["cubin_bytes"] > 0, (meta, f)
        # each thread's vectors of x and of the weight: 16-byte loads, and 16-byte stores of y
        assert f["ld_v4"] == 2 * vpt and f["st_v4"] == vpt and f["ld_b16"] == 0, (meta, f)
        # warp butterfly (log2 32 = 5 steps), then one partial per warp through shared memory and a barrier
        assert f["shfl_bfly"] == 5 and f["st_shared"] >= 1 and f["bar"] >= 1 and f["rsqrt"] == 1, (meta, f)
        # f32 -> bf16 roundings, in elements: y's, and with cast_before_weight the normalised value's first
        # (or, weight without offset, a bf16 product of it and the weight: rn(bf16 x bf16), torch's own)
        rounded = 2 * f["cvt_rn_bf16x2"] + f["cvt_rn_bf16"] + 2 * f["mul_bf16x2"]
        assert rounded == 8 * vpt * (2 if meta["cast_before_weight"] else 1), (meta, f)
        assert f["mul_bf16x2"] == 0 or (meta["cast_before_weight"] and "unit_offset" not in meta["problem"])


def test_unaligned_rows_compile_to_the_element_wise_path(tmp_path):
    jobs = [j for j in _jobs(tmp_path, vectorised=False) if j[1]["threads"] == 256 and not j[1]["cast_before_weight"]]
    facts = _compile_in_subprocess([j for j, _ in jobs[:2]], tmp_path)
    for (_, meta), f in zip(jobs[:2], facts):
        assert f["entries"] == 1 and f["ld_v4"] == 0 and f["st_v4"] == 0, (meta, f)
        assert f["ld_b16"] == 2 * -(-meta["n_cols"] // 256), (meta, f)


def test_a_binding_without_weight_compiles_to_a_kernel_that_reads_x_only(tmp_path):
    d = next(d for d in _forward_rmsnorms() if "h4096" in d.name)
    p = load_problem(d)
    r = next(r for r in FAMILY.renderers if r.language == "cute_dsl")
    src = r.sources(p, Binding({"x": "x", "eps": "eps"}), {"cast_before_weight": True, "threads": 128})["kernel.py"]
    assert _constants(src)["HAS_WEIGHT"] is False and _constants(src)["CAST_BEFORE_WEIGHT"] is False
    assert "_rmsnorm_rows(x, None, y, eps)" in src
    (tmp_path / "noweight.py").write_text(src, encoding="utf-8")
    job = {"path": str(tmp_path / "noweight.py"), "dtype": "bfloat16", "n_cols": 4096, "vectorised": True}
    (f,) = _compile_in_subprocess([job], tmp_path)
    vpt = 4096 // 8 // 128
    assert f["entries"] == 1 and f["ld_v4"] == vpt and f["st_v4"] == vpt and f["mul_bf16x2"] == 0, f
    assert 2 * f["cvt_rn_bf16x2"] + f["cvt_rn_bf16"] == 8 * vpt, f


if __name__ == "__main__":
    _compile_main(sys.argv[1])
