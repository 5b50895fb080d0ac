"""Offline templates in Triton, run in Triton's interpreter on the CPU against the reference."""

from __future__ import annotations

import pytest

# ------------------------------------------------------------------------------ triton, interpreted on CPU

_INTERPRET_SCRIPT = r"""
import json, sys, types, torch
sys.path.insert(0, sys.argv[1])
from tests.offline_problems import SYNTHETIC, write_problem, run_solution_here, FIXTURE
from agents.offline.templates import FAMILIES, Binding, build_solution
from agents.offline.graph import trace_ops
from sol_bench.problem import load_problem
import pathlib, tempfile
root = pathlib.Path(tempfile.mkdtemp())
names = json.loads(sys.argv[2])
ok = {}
for name in names:
    p = load_problem(FIXTURE) if name == "rmsnorm_small" else load_problem(write_problem(root, name))
    sig = trace_ops(p)
    good = 0
    for fam in FAMILIES:
        for b in fam.match(p, sig):
            for r in fam.renderers:
                if r.language != "triton":
                    continue
                params = r.variants()[0]
                if "bm" in params:
                    params = {**params, "bm": 16, "bn": 16, "bk": 16}
                sol = build_solution(p, fam.name, r, b, params)
                try:
                    run_solution_here(p, sol)
                    good += 1
                except AssertionError as e:
                    print(name, "variant failed:", str(e)[:200])
                if "split" in params:  # off CUDA "auto" never splits: force 3 slices, the last one past K
                    # the slices added up in the same launch (arrival counters), and by a second kernel
                    for tag, sil in (("/split3", True), ("/split3_sum_kernel", False)):
                        try:
                            run_solution_here(p, build_solution(p, fam.name, r, b, {**params, "split": 3, "atomic": None,
                                                                                   "sum_in_launch": sil}), calls=2)
                            ok[name + tag] = ok.get(name + tag, 0) + 1
                        except AssertionError as e:
                            print(name, "split variant failed:", tag, str(e)[:200])
                            ok[name + tag] = 0
    ok[name] = good
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_triton_templates_are_correct_in_the_interpreter(tmp_path):
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    names = ["rmsnorm_small", "softmax_t", "layernorm_t", "swiglu_halves", "gelu_tanh_plain", "linear_relu", "mlp_gelu",
             "mlp_relu_nobias", "mha_block", "mha_block_biased"]
    result = run_interpreted(_INTERPRET_SCRIPT, names, timeout_s=240)
    assert all(result[n] >= 1 for n in names), result
    for mlp in ("mlp_gelu", "mlp_relu_nobias"):
        assert result.get(f"{mlp}/split3", 0) >= 1 and result.get(f"{mlp}/split3_sum_kernel", 0) >= 1, result
    assert all(v >= 1 for k, v in result.items() if "/split3" in k), result



# The MLP interpreter scripts' first lines: each synthetic problem by name, its MLP binding ``b`` and the Triton
# renderer ``r``; ``ok`` collects what the script prints after RESULT.
_MLP_SCRIPT_HEAD = r"""
import json, sys, types, torch
sys.path.insert(0, sys.argv[1])
from tests.offline_problems import write_problem, run_solution_here
from agents.offline.templates import FAMILIES, build_solution
from agents.offline.graph import trace_ops
from sol_bench.problem import load_problem
from sol_bench.inputs import make_inputs, output_specs
from sol_bench.reference import load_reference
import pathlib, tempfile
root = pathlib.Path(tempfile.mkdtemp())
fam = next(f for f in FAMILIES if f.name == "mlp")
r = next(r for r in fam.renderers if r.language == "triton")
ok = {}
for name in json.loads(sys.argv[2]):
    p = load_problem(write_problem(root, name))
    [b] = fam.match(p, trace_ops(p))
"""

_MLP_TMA_SCRIPT = _MLP_SCRIPT_HEAD + r"""
    for split, sil in ((1, False), (3, False), (3, True)):
        # down tiles of their own; a 32-wide column tile the fit may not narrow
        params = {**r.variants()[0], "bm": 16, "bn": 16, "bk": 16, "down_bn": 32, "down_bk": 32, "fit": False,
                  "tma": True, "split": split, "sum_in_launch": sil, "atomic": None}
        sol = build_solution(p, fam.name, r, b, params)
        module = types.ModuleType("probe_tma")
        exec(compile(sol.sources[0].content, "kernel.py", "exec"), module.__dict__)
        x = torch.zeros(5, 48)
        took = [module._tma_ready(x), module._tma_ready(x.bfloat16()), module._tma_ready(x[:, 1:]),
                module._tma_ready(x.t())]
        try:
            run_solution_here(p, sol, calls=2)
            ok[f"{name}/{split}/{sil}"] = took
        except AssertionError as e:
            print(name, split, sil, str(e)[:300])
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_mlp_tma_kernels_are_correct_in_the_interpreter():
    """The MLP's descriptor-loaded GEMMs (up, down, split-K summed both ways) against the reference; the
    interpreter takes the descriptor path for float32 and refuses bfloat16, unaligned rows and transposes."""
    pytest.importorskip("triton.tools.tensor_descriptor")
    from triton_interp import run_interpreted

    result = run_interpreted(_MLP_TMA_SCRIPT, ["mlp_gelu", "mlp_relu_nobias"], timeout_s=240)
    assert len(result) == 6, result
    assert all(took == [True, False, False, False] for took in result.values()), result

_MLP_FUSED_SCRIPT = _MLP_SCRIPT_HEAD + r"""
    for split, tma in ((1, False), (3, False), (3, True), (2, True)):
        # tiles smaller than the problem: several up tiles per slice, several row and column tiles, and with
        # 3 slices of a 48- or 64-wide hidden layer one slice past the end (no up tiles, zero partials)
        params = {"fused": True, "bm": 16, "bn": 16, "bk": 16, "down_bn": 16, "down_bk": 32, "split": split,
                  "num_warps": 4, "stages": 2, "tma": tma, "prefetch": True, "one_launch": True, "graph": False}
        sol = build_solution(p, fam.name, r, b, params)
        src = sol.sources[0].content
        run_solution_here(p, sol, calls=2)
        # the same file by hand: after a call every counter is back at zero
        module = types.ModuleType("probe_fused")
        exec(compile(src, "kernel.py", "exec"), module.__dict__)
        ref = load_reference(p.definition)
        w = p.workloads[0]
        inputs = make_inputs(p.definition, w, "cpu", 5, ref)
        outs = [torch.full(s, float("nan"), dtype=t) for s, t in output_specs(p.definition, w).values()]
        module.run(*inputs.values(), *outs)
        left = sum(int(c.abs().sum()) for c in module._COUNTERS.values())
        ok[f"{name}/{split}/{tma}"] = {"left": left, "finite": bool(torch.isfinite(outs[0]).all())}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_fused_mlp_is_correct_in_the_interpreter():
    """The one-launch MLP (``fused``): up tiles, down slices waiting on them, the last slice of each output tile
    summing the partials, against the reference twice in a row (every counter back at zero after a call), by
    pointers and by descriptors, one slice and several (one past the hidden width)."""
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    result = run_interpreted(_MLP_FUSED_SCRIPT, ["mlp_gelu", "mlp_relu_nobias"], timeout_s=300)
    assert len(result) == 8, result
    assert all(v == {"left": 0, "finite": True} for v in result.values()), result


_MLP_ATOMIC_SCRIPT = _MLP_SCRIPT_HEAD + r"""
    for split, tma, atomic in ((3, False, "ptr"), (3, True, "ptr"), (2, True, "desc"), (1, True, "desc")):
        params = {**r.variants()[0], "bm": 16, "bn": 16, "bk": 16, "down_bn": 32, "down_bk": 32, "fit": False,
                  "tma": tma, "split": split, "pdl": False, "graph": False, "atomic": atomic}
        sol = build_solution(p, fam.name, r, b, params)
        src = sol.sources[0].content
        try:  # into NaN-filled outputs, twice: the up projection's zeros are all the reductions start from
            run_solution_here(p, sol, calls=2)
            passed = True
        except AssertionError as e:
            print(name, split, tma, atomic, str(e)[:300])
            passed = False
        ok[f"{name}/{split}/{tma}/{atomic}"] = {
            "passed": passed, "sum_kernel": "_sum_launch(" in src, "workspace": "ws = torch.empty" in src,
            "reduce": {"ptr": "tl.atomic_add(c_ptr" in src, "desc": "c_ptr.atomic_add(" in src}[atomic]}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_mlp_atomic_split_k_is_correct_in_the_interpreter():
    """``atomic``: the down projection's slices reduced straight into the output, which the up projection zeroes
    first: no workspace and no sum kernel. Against the reference twice into NaN-filled outputs, through pointers
    and descriptor loads, 1-3 slices. The copy engine's reduction (``desc``) renders, but the interpreter has none:
    those files take the pointer path off the GPU, and the judge checks them on it (PASSED on an H200)."""
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    result = run_interpreted(_MLP_ATOMIC_SCRIPT, ["mlp_gelu", "mlp_relu_nobias"], timeout_s=300)
    assert len(result) == 8, result
    assert all(v == {"passed": True, "sum_kernel": False, "workspace": False, "reduce": True}
               for v in result.values()), result


_MLP_OVERLAP_SCRIPT = _MLP_SCRIPT_HEAD + r"""
    for split in (1, 3, 4):
        # several row and column tiles; with 3 or 4 slices of a 48- or 64-wide hidden layer, slices past its end
        params = {"overlap": True, "graph": False, "bm": 16, "bn": 16, "bk": 16, "down_bn": 32, "down_bk": 32,
                  "split": split, "tma": True, "num_warps": 4, "stages": 2}
        sol = build_solution(p, fam.name, r, b, params)
        run_solution_here(p, sol, calls=2)  # NaN-filled outputs: slice 0's up CTAs zero them first
        module = types.ModuleType("probe_overlap")
        exec(compile(sol.sources[0].content, "kernel.py", "exec"), module.__dict__)
        w = p.workloads[0]
        inputs = make_inputs(p.definition, w, "cpu", 5, load_reference(p.definition))
        outs = [torch.full(s, float("nan"), dtype=t) for s, t in output_specs(p.definition, w).values()]
        module.run(*inputs.values(), *outs)
        left = sum(int(c.abs().sum()) for c in module._COUNTERS.values())
        ok[f"{name}/{split}"] = {"left": left, "finite": bool(torch.isfinite(outs[0]).all())}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_overlapped_mlp_is_correct_in_the_interpreter():
    """``overlap``: the up launch zeroes the output (slice 0's CTAs) and counts its tiles in; the down launch's
    CTAs wait on those counts and add their slices into the output. Against the reference twice in a row into
    NaN-filled outputs, 1-4 slices (some past the hidden width), every counter back at zero after a call."""
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    result = run_interpreted(_MLP_OVERLAP_SCRIPT, ["mlp_gelu", "mlp_relu_nobias"], timeout_s=300)
    assert len(result) == 6, result
    assert all(v == {"left": 0, "finite": True} for v in result.values()), result


_MLP_WS_SCRIPT = r"""
import json, sys, types, torch
sys.path.insert(0, sys.argv[1])
import tests.offline_problems as t
from agents.offline.templates import FAMILIES, build_solution
from agents.offline.graph import trace_ops
from sol_bench.problem import load_problem
import pathlib, tempfile
root = pathlib.Path(tempfile.mkdtemp())
axes, ins, outs, ref, wl = t.SYNTHETIC["mlp_gelu"]
t.SYNTHETIC["mlp_gelu_bf16"] = (axes, {k: (s, "bfloat16") for k, (s, _) in ins.items()},
                                {k: (s, "bfloat16") for k, (s, _) in outs.items()}, ref, wl)
fam = next(f for f in FAMILIES if f.name == "mlp")
r = next(r for r in fam.renderers if r.language == "triton")
ok = {}
for name in json.loads(sys.argv[2]):
    p = load_problem(t.write_problem(root, name))
    [b] = fam.match(p, trace_ops(p))
    params = {**r.variants()[0], "bm": 16, "bn": 16, "bk": 16, "down_bn": 32, "down_bk": 32, "fit": False,
              "tma": False, "split": 3, "pdl": False, "graph": False, "ws_bf16": True, "atomic": None}
    sol = build_solution(p, fam.name, r, b, params)
    if name == "mlp_gelu":  # Triton 3.9's interpreter gets this GEMM wrong in bfloat16, whatever the workspace
        t.run_solution_here(p, sol, calls=2)
    # the workspace's dtype, as the file picks it for this problem's output
    module = types.ModuleType("probe_ws")
    exec(compile(sol.sources[0].content, "kernel.py", "exec"), module.__dict__)
    picked = []
    real_empty = torch.empty
    def spy(*a, **k):
        out = real_empty(*a, **k)
        if len(a) == 1 and len(a[0]) == 3:
            picked.append(str(out.dtype))
        return out
    module.torch = types.SimpleNamespace(**{n: getattr(torch, n) for n in dir(torch) if not n.startswith("__")})
    module.torch.empty = spy
    from sol_bench.inputs import make_inputs, output_specs
    from sol_bench.reference import load_reference
    w = p.workloads[0]
    inputs = make_inputs(p.definition, w, "cpu", 5, load_reference(p.definition))
    outs = [real_empty(s, dtype=d) for s, d in output_specs(p.definition, w).values()]
    module.run(*inputs.values(), *outs)
    ok[name] = picked
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_mlp_bf16_partial_sums_only_for_a_bf16_output():
    """``ws_bf16``: the split-K partial sums in bfloat16 where the output is bfloat16, in float32 (and matching
    the reference) for a float32 MLP. The bfloat16 results are checked on the GPU, by the judge (PASSED on an
    H200): the interpreter computes this bfloat16 GEMM wrongly with either workspace."""
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    result = run_interpreted(_MLP_WS_SCRIPT, ["mlp_gelu", "mlp_gelu_bf16"], timeout_s=240)
    assert result == {"mlp_gelu": ["torch.float32"], "mlp_gelu_bf16": ["torch.bfloat16"]}, result


_PDL_SCRIPT = r"""
import json, sys, types, torch
sys.path.insert(0, sys.argv[1])
from tests.offline_problems import write_problem, run_solution_here
from agents.offline.templates import FAMILIES, build_solution
from agents.offline.graph import trace_ops
from sol_bench.problem import load_problem
import pathlib, tempfile
root = pathlib.Path(tempfile.mkdtemp())
ok = {}
for name in json.loads(sys.argv[2]):
    p = load_problem(write_problem(root, name))
    fam = next(f for f in FAMILIES if f.name == name.split("_")[0])
    r = next(r for r in fam.renderers if r.language == "triton")
    b = fam.match(p, trace_ops(p))[0]
    params = {**r.variants()[0], "pdl": True, "graph": False}
    if fam.name == "mlp":  # small tiles, the down projection split in 3 (the sum kernel launched too)
        params.update(bm=16, bn=16, bk=16, down_bn=32, down_bk=32, tma=False, split=3, atomic=None)
    sol = build_solution(p, fam.name, r, b, params)
    src = sol.sources[0].content
    module = types.ModuleType("probe_pdl")
    exec(compile(src, "kernel.py", "exec"), module.__dict__)
    run_solution_here(p, sol, calls=2)
    ok[name] = {"ready_cpu": module._gdc_ready(torch.zeros(1)), "waits": src.count("tl.extra.cuda.gdc_wait()"),
                "pdl_launches": src.count("launch_pdl=gdc") + src.count("**gdc")}
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_pdl_variants_are_correct_in_the_interpreter():
    """``pdl``: every kernel of the MLP and MHA files waits on the one before (griddepcontrol) and each launch asks
    for programmatic dependent launch, turned off for CPU tensors (the interpreter has no such instruction);
    the results still match the reference."""
    pytest.importorskip("triton")
    from triton_interp import run_interpreted

    result = run_interpreted(_PDL_SCRIPT, ["mlp_gelu", "mha_block_biased"], timeout_s=240)
    assert set(result) == {"mlp_gelu", "mha_block_biased"}, result
    assert all(r["ready_cpu"] is False for r in result.values()), result
    # the MLP: up, down, down split, split sum kernels; launches: up, down, down split, sum
    assert result["mlp_gelu"]["waits"] >= 4 and result["mlp_gelu"]["pdl_launches"] == 4, result
    # the MHA: the four projection kernels and the attention's two; launches: qkv (one or three), out, fwd, merge
    assert result["mha_block_biased"]["waits"] == 6 and result["mha_block_biased"]["pdl_launches"] >= 4, result



# the GEMM family's synthetic problems, each traced and bound (``name``, ``p``, ``b``), in the scripts below
_GEMM_SCRIPT_HEAD = r"""import json, sys, torch, pathlib, tempfile
sys.path.insert(0, sys.argv[1])
from tests.offline_problems import write_problem, run_solution_here
from agents.offline.templates import FAMILIES, build_solution
from agents.offline.graph import trace_ops
from sol_bench.inputs import make_inputs, output_specs
from sol_bench.problem import load_problem
from sol_bench.reference import load_reference
root = pathlib.Path(tempfile.mkdtemp())
fam = next(f for f in FAMILIES if f.name == "gemm")
ok = {}
for name in json.loads(sys.argv[2]):
    p = load_problem(write_problem(root, name))
    [b] = fam.match(p, trace_ops(p))
"""

_PERSISTENT_GEMM_SCRIPT = _GEMM_SCRIPT_HEAD + r"""    takers = [r for r in fam.renderers if r.language == "triton" and r.accepts(b) and r.variants()[0].get("persistent")]
    ok[name] = {"offered": len(takers)}
    for r in takers:
        # each tile, and K forced into 3 slices (off CUDA "auto" never splits: one "SM")
        for params in [*r.variants(), {**r.variants()[0], "split": 3}]:
            params = {**params, "bm": 16, "bn": 16, "bk": 16}  # tiles the interpreter runs in seconds
            module = run_solution_here(p, build_solution(p, fam.name, r, b, params), calls=2)
            launched = []
            for fn in ("gemm_persistent", "gemm_split", "_gemm_launch"):
                if hasattr(module, fn):
                    real = getattr(module, fn)
                    setattr(module, fn, lambda *a, fn=fn, real=real, **k: launched.append(fn) or real(*a, **k))
            w = p.workloads[0]
            ins = make_inputs(p.definition, w, "cpu", seed=1)
            module.run(*ins.values(), *[torch.empty(s, dtype=t) for s, t in output_specs(p.definition, w).values()])
            ok[name][f"subtile={params['subtile']} split={params['split']}"] = launched
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_the_gemm_templates_persistent_kernel_serves_calls_of_many_rows_and_matches_the_reference():
    """Where some workload has more rows than the persistent GEMM's minimum against a weight as stored, the GEMM
    family offers it (two tiles), each correct with its bias and activation; K split in slices only where the
    epilogue is linear; calls of few rows are not offered it."""
    pytest.importorskip("triton.tools.tensor_descriptor")
    from triton_interp import run_interpreted

    result = run_interpreted(_PERSISTENT_GEMM_SCRIPT, ["linear_gelu_rows", "linear_rows", "linear_relu"], timeout_s=300)
    assert result["linear_relu"] == {"offered": 0}, result  # 33 rows
    persistent = ["gemm_persistent"]
    assert result["linear_gelu_rows"] == {"offered": 1, "subtile=True split=auto": persistent,
                                          "subtile=False split=auto": persistent,
                                          "subtile=True split=3": persistent}, result  # gelu: never split
    assert result["linear_rows"] == {"offered": 1, "subtile=True split=auto": persistent,
                                     "subtile=False split=auto": persistent,
                                     "subtile=True split=3": ["gemm_split"]}, result


_GEMM_CHOICE_SCRIPT = _GEMM_SCRIPT_HEAD + r"""    [r] = [r for r in fam.renderers if r.language == "triton" and r.accepts(b) and r.variants()[0].get("persistent")]
    ref = load_reference(p.definition)
    w = p.workloads[0]
    ins = make_inputs(p.definition, w, "cpu", seed=1)
    want = ref.run(*ins.values()).float()
    for split in ("auto", 3):
        params = {**r.variants()[0], "bm": 16, "bn": 16, "bk": 16, "split": split}
        sol = build_solution(p, fam.name, r, b, params)
        module = run_solution_here(p, sol, calls=1)
        launched = []
        for fn in ("gemm_persistent", "gemm_split", "_gemm_launch"):
            real = getattr(module, fn, None)
            if real is not None:
                setattr(module, fn, lambda *a, fn=fn, real=real, **k: launched.append(fn) or real(*a, **k))
        module._measured_here = lambda t: True  # the GPU's branch: a way chosen per call shape
        seen = {"shipped": [s.path for s in sol.sources]}
        for forced in ("default", "tiled", "persistent", "split"):
            asked = []

            def choose(key, tries, memo, forced=forced, **kw):
                if key not in memo:  # what chosen_way does on a GPU: every try's output, then the memo
                    asked.append(sorted(tries))
                    seen.setdefault("tries_agree", []).append(
                        all(torch.allclose(t().float(), want, atol=2e-2, rtol=2e-2) for t in tries.values()))
                    launched.clear()  # the tries' own launches: what runs the call comes after
                    memo[key] = forced
                return memo[key]

            module.chosen_way, module._CHOSEN = choose, {}
            runs = []
            for _ in range(2):  # the second call of the shape takes the remembered way, measuring nothing
                launched.clear()
                y = torch.full(output_specs(p.definition, w)["y"][0], float("nan"), dtype=ins["x"].dtype)
                module.run(*ins.values(), y)
                right = bool(torch.allclose(y.float(), want, atol=2e-2, rtol=2e-2))
                runs.append({"launched": list(launched), "right": right})
            seen[forced] = {"asked": asked, "runs": runs}
        ok[f"{name} split={split}"] = seen
print("RESULT", json.dumps(ok))
"""


@pytest.mark.slow
def test_the_gemm_templates_persistent_candidate_runs_the_way_measured_fastest_per_call_shape():
    """The persistent GEMM candidate ships the chooser (``solforge_way.py``) and on a GPU hands it, per call shape,
    the library's way (cuBLAS and the activation), the tiled kernel and the persistent kernel or the K split (never
    for an activation): every try computes the reference, the chosen way is the one that runs, the shape's second
    call asks nothing, and a way the call does not offer falls back to the library's."""
    pytest.importorskip("triton.tools.tensor_descriptor")
    from triton_interp import run_interpreted

    names = ["linear_rows", "linear_gelu_rows", "linear_tanh_rows"]
    result = run_interpreted(_GEMM_CHOICE_SCRIPT, names, timeout_s=300)
    kernel_of = {"tiled": ["_gemm_launch"], "persistent": ["gemm_persistent"], "split": ["gemm_split"], "default": []}
    for case, seen in result.items():
        assert seen["shipped"] == ["kernel.py", "solforge_way.py"], case
        assert seen["tries_agree"] and all(seen["tries_agree"]), case
        linear, forced_split = case.startswith("linear_rows"), case.endswith("split=3")
        third = "split" if linear and forced_split else "persistent"
        for way in ("default", "tiled", "persistent", "split"):
            first, second = seen[way]["runs"]
            assert seen[way]["asked"] == [sorted(["default", "tiled", third])], (case, way)
            runs_as = way if way in ("default", "tiled", third) else "default"
            assert first == second == {"launched": kernel_of[runs_as], "right": True}, (case, way, seen[way])


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_the_gemm_templates_persistent_candidate_measures_its_ways_on_the_gpu(tmp_path, capfd):
    """On a GPU the persistent GEMM candidate measures its ways on a shape's first call, says which it keeps
    (``solforge way gemm``) and computes the reference at every call."""
    import sys as _sys
    import types

    import torch

    from agents.offline.graph import trace_ops
    from agents.offline.templates import FAMILIES, build_solution
    from sol_bench.inputs import make_inputs
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference
    from tests.offline_problems import write_problem

    p = load_problem(write_problem(tmp_path, "linear_rows"))
    fam = next(f for f in FAMILIES if f.name == "gemm")
    [b] = fam.match(p, trace_ops(p))
    [r] = [r for r in fam.renderers if r.language == "triton" and r.accepts(b) and r.variants()[0].get("persistent")]
    sol = build_solution(p, fam.name, r, b, r.variants()[0])
    staged = tmp_path / "sol"
    staged.mkdir()
    for src in sol.sources:
        (staged / src.path).write_text(src.content)
    _sys.path.insert(0, str(staged))
    try:
        module = types.ModuleType("gemm_candidate_on_gpu")
        exec(compile(sol.sources[0].content, str(staged / "kernel.py"), "exec"), module.__dict__)
    finally:
        _sys.path.remove(str(staged))
    ref = load_reference(p.definition)
    ins = make_inputs(p.definition, p.workloads[0], "cuda", seed=2)
    want = ref.run(*ins.values())
    for _ in range(2):
        y = torch.full_like(want, float("nan"))
        module.run(*ins.values(), y)
        torch.testing.assert_close(y.float(), want.float(), atol=2e-2, rtol=2e-2)
    told = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("solforge way gemm")]
    assert len(told) == 1, told  # one shape, measured once
    assert told[0].split(": keeps ", 1)[1].split(";")[0] in ("default", "tiled", "persistent", "split"), told
