"""bench/gemm_vs_cublas.py on the CPU: the GEMM shapes it collects from a bundled linear problem are the ones its
definition's axes give, a broken problem is skipped with a reason, and the Triton GEMM it renders computes
``a @ b`` in Triton's interpreter for every operand layout."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
LINEAR = REPO / "data" / "problems" / "L1" / "linear_bias_k3584_n512_bf16"


def _bench(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("gemm_vs_cublas", REPO / "bench" / "gemm_vs_cublas.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_shapes_of_a_linear_problem_follow_its_axes_and_a_broken_problem_is_skipped(tmp_path, monkeypatch):
    from sol_bench.problem import load_problem

    bench = _bench(monkeypatch)
    problem = load_problem(LINEAR)
    d = problem.definition
    (x_name, x_spec), (w_name, w_spec) = [(n, s) for n, s in d.inputs.items() if len(s.shape or []) == 2]
    want = set()
    for uuid in problem.spread_workloads(3):
        env = d.resolve_axes(next(w for w in problem.workloads if w.uuid == uuid).axes)
        (rows, k), (n, k_w) = x_spec.concrete_shape(env), w_spec.concrete_shape(env)
        assert k == k_w
        want.add(bench.Shape(rows, n, k, "bf16", b_t=True))
    assert len(want) == 3, "the spread should give three distinct row counts"

    broken = tmp_path / "broken_problem"
    broken.mkdir()
    (broken / "definition.json").write_text("{not json")
    logged: list[str] = []
    shapes = bench.collect_shapes([tmp_path, LINEAR], 3, log=logged.append)
    assert set(shapes) == want
    assert all(problems == [problem.name] for problems in shapes.values())
    assert len(logged) == 1 and logged[0].startswith("skip broken_problem: ")
    assert len(bench.collect_shapes([LINEAR], 1, log=logged.append)) == 1


def test_the_recorder_keeps_half_precision_mm_and_addmm_with_their_layouts(monkeypatch):
    bench = _bench(monkeypatch)
    x, w, bias = torch.randn(5, 8).half(), torch.randn(3, 8).half(), torch.randn(3).half()
    rec = bench._GemmRecorder()
    with rec:
        torch.addmm(bias.float(), x.float(), w.float().t())  # fp32: not a shape of the bench
        torch.nn.functional.linear(x.bfloat16(), w.bfloat16(), bias.bfloat16())  # addmm(bias, x, w.t())
        torch.mm(x, torch.randn(8, 3).half())
        torch.mm(torch.randn(8, 5).half().t(), w.t().contiguous())  # A as X.t(), as in a weight gradient
    assert rec.shapes == [bench.Shape(5, 3, 8, "bf16", b_t=True), bench.Shape(5, 3, 8, "fp16", b_t=False),
                          bench.Shape(5, 3, 8, "fp16", b_t=False, a_t=True)]  # fmt: skip


def test_match_check_and_summary_tell_a_wrong_result_and_the_bars(monkeypatch):
    bench = _bench(monkeypatch)
    a, b = bench.operands(bench.Shape(9, 7, 33, "fp16", b_t=True), torch.device("cpu"))
    want = a.float() @ b.float()
    assert bench.matches(want.half(), want) and not bench.matches(want.half() * 1.05, want)
    rows = [bench.Row(bench.Shape(16, 4096, 4096, "bf16", True), ["p"], cublas_us=10.0, ours_us=8.0),
            bench.Row(bench.Shape(4096, 4096, 4096, "bf16", True), ["p"], cublas_us=800.0, ours_us=1000.0),
            bench.Row(bench.Shape(8192, 4096, 4096, "bf16", True), ["p"], cublas_us=1600.0, ours_us=1600.0)]
    small, large = bench.summary(rows)
    assert small.startswith("- M <= 64: 1 shapes, geomean 125.0%") and "at or above 100%: 1 of 1" in small
    assert f"geomean {100 * math.sqrt(0.8):.1f}% of cuBLAS, min 80.0%; at or above 86%: 1 of 2" in large
    assert math.isclose(rows[1].tflops(rows[1].ours_us), 2 * 4096**3 / 1e-3 / 1e12)  # TFLOP/s at 1000 µs


_INTERPRET_SCRIPT = r"""
import json, pathlib, sys, tempfile, torch
sys.path.insert(0, sys.argv[1] + "/bench")
import gemm_vs_cublas as bench
kernels = bench.gemm_module(pathlib.Path(tempfile.mkdtemp()))
gemm = kernels.gemm
cpu, out = torch.device("cpu"), {}
for b_t in (False, True):
    for a_t in (False, True):
        s = bench.Shape(37, 24, 40, "fp16", b_t, a_t)  # edges: no dimension a multiple of the 16x16x16 tile
        a, b = bench.operands(s, cpu)
        got = gemm(a, b, 16, 16, 16, 2, 4, 1)
        out[f"b_t={b_t} a_t={a_t}"] = [bench.matches(got, a.float() @ b.float()), got.dtype == a.dtype]
s = bench.Shape(3, 20, 48, "fp16", True)  # every candidate of a small-M linear: the tile grid and the GEMV
a, b = bench.operands(s, cpu)
for name, fn in bench.candidates(s, kernels, a, b).items():
    out[name] = [bench.matches(fn(), a.float() @ b.float())]
s = bench.Shape(72, 24, 40, "fp16", True)  # past small M, a weight as stored: the descriptor form too
a, b = bench.operands(s, cpu)
out["tma"] = [bench.matches(kernels.gemm_tma(a, b.t(), 16, 16, 16, 2, 4, 1), a.float() @ b.float())]
offered = bench.candidates(s, kernels, a, b)
out["tma offered"] = [sum(k.endswith(" tma") for k in offered) == len(bench.LARGE_TILES)]
out["persistent offered"] = [sum(k.startswith("persistent ") for k in offered) == len(bench.PERSISTENT)]
s = bench.Shape(200, 40, 48, "fp16", True)  # 13 x 3 tiles of 16x16 over 3 programs: each walks several
a, b = bench.operands(s, cpu)
for subtile in (False, True):
    got = kernels.gemm_persistent(a, b.t(), 16, 16, 16, 2, 4, 1, subtile)
    out[f"persistent subtile={subtile}"] = [bench.matches(got, a.float() @ b.float())]
for split in (2, 3):  # K = 48 in 3 steps of 16: the last slice of the 2-way split half empty, of 3 each one step
    got = kernels.gemm_split(a, b.t(), split, bm=16, bn=16, bk=16, num_warps=4, num_stages=1)
    out[f"split-K {split}"] = [bench.matches(got, a.float() @ b.float())]
out["no split off CUDA (one SM)"] = [kernels.split_for(a, b.t()) == 1]
s = bench.Shape(20, 16, 32, "fp16", True)  # 2 tiles, fewer than the 3 programs' stride: one program each
a, b = bench.operands(s, cpu)
out["persistent, fewer tiles than programs"] = [bench.matches(kernels.gemm_persistent(a, b.t(), 16, 16, 16, 1, 4, 1),
                                                              a.float() @ b.float())]
print("RESULT", json.dumps(out))
"""


@pytest.mark.slow
def test_rendered_triton_gemm_computes_the_product_in_the_interpreter():
    pytest.importorskip("triton")
    sys.path.insert(0, str(REPO / "tests"))
    from triton_interp import run_interpreted

    result = run_interpreted(_INTERPRET_SCRIPT, [], timeout_s=240)
    assert len([k for k in result if k.startswith("b_t=")]) == 4
    assert sum(k.startswith("triton ") for k in result) >= 5 and any(k.startswith("gemv ") for k in result)
    assert all(all(v) for v in result.values()), result


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_shape_is_timed_against_cublas_on_the_gpu(monkeypatch, tmp_path):
    bench = _bench(monkeypatch)
    kernels = bench.gemm_module(tmp_path)
    row = bench.measure(bench.Shape(16, 1024, 1024, "bf16", True), ["p"], kernels, torch.device("cuda"), "events",
                        100.0, 5)  # fmt: skip
    assert row.cublas_us > 0 and row.ours_us > 0 and row.ours in row.times_us
    assert any(k.startswith("gemv ") for k in row.times_us)


@pytest.mark.parametrize("subtile,warp_specialize,act", [(True, False, "none"), (False, False, "gelu"),
                                                         (True, True, "silu"), (False, False, "tanh")])
def test_the_persistent_gemm_compiles_for_sm90_to_tensor_cores_fed_by_the_copy_engine(tmp_path, monkeypatch,
                                                                                       subtile, warp_specialize, act):
    pytest.importorskip("triton")
    from tests.triton_interp import compile_sm90

    kernels = _bench(monkeypatch).gemm_module(tmp_path)
    types = {"a_desc": "tensordesc<bf16[128,64]>", "w_desc": "tensordesc<bf16[256,64]>", "bias_ptr": "*bf16",
             "c_desc": f"tensordesc<bf16[128,{128 if subtile else 256}]>", "M": "i32", "N": "i32", "K": "i32"}
    consts = dict(BM=128, BN=256, BK=64, GROUP=8, PROGRAMS=132, SUBTILE=subtile, WARP_SPECIALIZE=warp_specialize,
                  HAS_BIAS=act != "none", ACT=act, PRECISION="tf32")
    ptx = compile_sm90(kernels._gemm_persistent, types, consts).asm["ptx"]
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    # the epilogue is compiled in only where asked: a bias read and the activation's math
    assert ("ld.global" in ptx) == (act != "none")
    assert ("ex2.approx" in ptx) == (act in ("silu", "gelu", "tanh"))


def test_the_cuda_gemv_is_offered_at_decode_rows_of_a_stored_weight_only(monkeypatch):
    """The CUDA C++ GEMV serves M <= 16 rows of a contiguous A against a weight [N, K] as stored (B = W.t())."""
    import types

    bench = _bench(monkeypatch)
    kernels = types.SimpleNamespace(gemm=None, _tma_ready=lambda a, w: False)
    fake = {"cuda gemv fake": lambda a, w: a @ w.t()}
    cases = ((1, True, False, True), (16, True, False, True), (17, True, False, False), (3, False, False, False),
             (3, True, True, False))  # fmt: skip
    for m, b_t, a_t, offered in cases:
        s = bench.Shape(m, 24, 40, "fp16", b_t, a_t)
        a, b = bench.operands(s, torch.device("cpu"))
        found = bench.candidates(s, kernels, a, b, fake)
        assert ("cuda gemv fake" in found) is offered, (m, b_t, a_t)
        if offered:
            assert bench.matches(found["cuda gemv fake"](), a.float() @ b.float())


@pytest.mark.cuda_compile
def test_the_cuda_gemv_variants_render_from_one_linear_and_compile_for_sm90(tmp_path, monkeypatch):
    """``bench/cuda_gemv_bench.py`` renders both of the template's kernels from its own linear problem, and a
    variant's kernel.cu and binding.cpp compile to objects whose ``run`` takes (a, w, y)."""
    import shutil

    if shutil.which("nvcc") is None or shutil.which("nm") is None:
        pytest.skip("nvcc or nm not on PATH")
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import cuda_gemv_bench
    from cuda_build import compile_objects, demangle, run_symbols

    sols = cuda_gemv_bench.gemv_solutions(tmp_path / "problem")
    assert {name.split()[2] for name in sols} == {"kernelsplit", "kernelcols"}, sorted(sols)
    split = next(sol for name, sol in sols.items() if "kernelsplit" in name)
    objs = compile_objects(split, tmp_path / "build")
    [defined] = run_symbols(objs["kernel.cu"])["T"]
    assert demangle(defined) == "run(at::Tensor, at::Tensor, at::Tensor)"
    assert run_symbols(objs["binding.cpp"])["U"] == {defined}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_tiled_gemm_multiplies_float32_exactly_and_16_bit_types_on_tensor_cores(tmp_path, monkeypatch, dtype):
    """The templates' tiled kernel (``triton_gemm_kernel``) on float32 operands does what the reference's fp32
    matmul does, no TF32 rounding; bf16 keeps the tensor cores."""
    pytest.importorskip("triton")
    from tests.triton_interp import compile_sm90

    kernels = _bench(monkeypatch).gemm_module(tmp_path)
    types = {n: f"*{dtype}" for n in ("a_ptr", "b_ptr", "bias_ptr", "c_ptr")}
    gdc = {n: False for n in kernels._gemm.arg_names if n.isupper() and n not in ("M", "N", "K")}
    ptx = compile_sm90(kernels._gemm, types, {**gdc, "BM": 64, "BN": 64, "BK": 32, "GROUP": 8}).asm["ptx"]
    assert ("tf32" in ptx) is False
    assert ("wgmma.mma_async" in ptx) == (dtype == "bf16")


def test_the_split_k_launch_compiles_for_sm90_to_tensor_cores_fed_by_the_copy_engine(tmp_path, monkeypatch):
    """The GEMM family's split-K launch (descriptor loads, the last slice of a tile adding up the partial sums)
    compiles for the GPU, not only in the interpreter: WGMMA, bulk tensor copies and the arrival counter's atomic."""
    pytest.importorskip("triton")
    from tests.triton_interp import compile_sm90

    kernels = _bench(monkeypatch).gemm_module(tmp_path)
    types = {"a_ptr": "tensordesc<bf16[64,64]>", "b_ptr": "tensordesc<bf16[128,64]>", "bias_ptr": "*bf16",
             "c_ptr": "*bf16", "ws_ptr": "*fp32", "cnt_ptr": "*i32"}
    types.update({n: "i32" for n in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn", "k_per", "scs")})
    gdc = {n: False for n in kernels._gemm_split.arg_names if n.isupper() and n not in ("M", "N", "K")}
    consts = {**gdc, "SPLIT": 4, "HAS_BIAS": True, "BM": 64, "BN": 128, "BK": 64, "GROUP": 8}
    ptx = compile_sm90(kernels._gemm_split, types, consts).asm["ptx"]
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx and "atom.global.gpu.acq_rel.add" in ptx
