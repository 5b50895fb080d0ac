"""Unit tests of the judge's parts: correctness, axes, inputs, models, sandbox, staging, import hygiene, replay."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from judge_corpus import corpus
from judge_corpus.harness import fast_config
from sol_bench import axes, dtypes
from sol_bench.dtypes import DType
from sol_bench.errors import RewardHack, WorkloadError
from sol_bench.inputs import InputContext, make_inputs, read_safetensors
from sol_bench.judge import evaluate
from sol_bench.models import Definition, Solution, Status, Workload
from sol_bench.problem import load_problem, load_workloads
from sol_bench.reference import load_reference
from sol_bench.sandbox import landlock_abi
from sol_bench.staging import check_shadowing

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- axes


def _axes(spec: dict):
    return Definition.model_validate(_definition(axes_=spec, shape=list(spec)[:1])).axes


def test_axis_expressions_evaluate():
    env = {"H": 8, "K": 3, "A": 5}
    assert axes.evaluate("H // 2", env) == 4
    assert axes.evaluate("(H + A) * 2 - K % 2", env) == 25
    assert axes.evaluate("2 ** K", env) == 8
    assert axes.evaluate("H / 2", env) == 4 and isinstance(axes.evaluate("H / 2", env), int)
    assert axes.evaluate("-K + H", env) == 5
    assert axes.names("H * (K + A)") == {"H", "K", "A"}


def test_axis_expression_must_give_an_integer():
    with pytest.raises(ValueError, match="not an integer"):
        axes.evaluate("H / 3", {"H": 8})
    with pytest.raises(ValueError, match="zero"):
        axes.evaluate("H // (K - 3)", {"H": 8, "K": 3})
    with pytest.raises(ValueError):
        axes.evaluate("H ** 1000", {"H": 2})


@pytest.mark.parametrize(
    "expr",
    ["f(H)", "H.real", "H[0]", "1.5 * H", "__import__('os').system('true')", "H if K else 1", "lambda: 1",
     "H < K", "[H]", "'a' * H", "H; K"],
)  # fmt: skip
def test_disallowed_axis_syntax(expr):
    with pytest.raises(ValueError):
        axes.parse(expr)
    with pytest.raises(ValidationError):
        _axes({"H": {"type": "const", "value": 4}, "K": {"type": "const", "value": 1}, "E": {"type": "expr", "expression": expr}})


def test_axis_resolution_order_and_cycles():
    ax = _axes({"C": {"type": "expr", "expression": "B * 2"}, "B": {"type": "expr", "expression": "A + 1"},
                "A": {"type": "var"}})  # fmt: skip
    assert axes.resolve(ax, {"A": 3}) == {"A": 3, "B": 4, "C": 8}
    cyc = _axes({"X": {"type": "expr", "expression": "Y + 1"}, "Y": {"type": "expr", "expression": "X - 1"}})
    with pytest.raises(ValueError, match="cycle"):
        axes.resolve(cyc, {})
    with pytest.raises(ValueError, match="no value"):
        axes.resolve(ax, {})


def test_expression_over_undefined_axis_is_refused():
    with pytest.raises(ValidationError, match="undefined axis"):
        _axes({"A": {"type": "var"}, "B": {"type": "expr", "expression": "Z * 2"}})


# ------------------------------------------------------------------------------------------- inputs


def _definition(dtype: str = "float32", shape=("A", "B"), axes_=None, inputs=None, reference=None, **extra) -> dict:
    inputs = inputs or {"x": {"shape": list(shape), "dtype": dtype}}
    params = ", ".join(inputs)
    return {
        "name": "unit", "axes": axes_ or {"A": {"type": "var"}, "B": {"type": "const", "value": 8}},
        "inputs": inputs, "outputs": {"out": {"shape": list(shape), "dtype": dtype}},
        "reference": reference or f"def run({params}):\n    return {next(iter(inputs))}\n", **extra,
    }  # fmt: skip


def _workload(**kw) -> Workload:
    return Workload.model_validate({"uuid": "w", "axes": {"A": 3}, **kw})


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_every_dtype_generates_with_its_storage_shape(dtype):
    d = Definition.model_validate(_definition(dtype.value))
    x = make_inputs(d, _workload(), "cpu", seed=7)["x"]
    expected = (3, 4) if dtype is DType.float4_e2m1 else (3, 8)  # float4_e2m1 packs two values per byte
    assert tuple(x.shape) == expected
    assert x.dtype == dtypes.to_torch(dtype)
    assert x.view(torch.uint8).any(), "all-zero random input"
    meta = make_inputs(d, _workload(), "meta", seed=7)["x"]
    assert tuple(meta.shape) == expected and meta.dtype == x.dtype


def test_fp4_needs_an_even_last_dim():
    d = Definition.model_validate(_definition("float4_e2m1", axes_={"A": {"type": "var"}, "B": {"type": "const", "value": 7}}))
    with pytest.raises(ValueError, match="even"):
        make_inputs(d, _workload(), "cpu", seed=1)


def test_seeds_vary_the_distribution_not_just_the_values():
    d = Definition.model_validate(_definition(axes_={"A": {"type": "var"}, "B": {"type": "const", "value": 4096}}))
    stds, means = [], []
    for seed in range(12):
        x = make_inputs(d, _workload(axes={"A": 2}), "cpu", seed=seed)["x"]
        stds.append(float(x.std()))
        means.append(float(x.mean()))
    assert max(stds) / min(stds) > 1.5, stds
    assert max(means) - min(means) > 0.1, means


def test_norm_weight_like_input_is_not_all_ones():
    d = Definition.model_validate(load_problem(REPO / "tests/fixtures/problems/rmsnorm_small").definition.model_dump())
    w = make_inputs(d, Workload.model_validate({"uuid": "w", "axes": {"T": 2}, "inputs": {"eps": {"type": "scalar", "value": 1e-6}}}),
                    "cpu", seed=3)["weight"]  # fmt: skip
    assert w.shape == (256,)
    assert not torch.all(w == 1) and float(w.float().std()) > 0.01


def test_same_seed_replays_identically_and_inputs_differ_from_each_other():
    d = Definition.model_validate(_definition(inputs={"x": {"shape": ["A", "B"], "dtype": "bfloat16"},
                                                      "y": {"shape": ["A", "B"], "dtype": "bfloat16"}}))  # fmt: skip
    a = make_inputs(d, _workload(), "cpu", seed=11)
    b = make_inputs(d, _workload(), "cpu", seed=11)
    c = make_inputs(d, _workload(), "cpu", seed=12)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["x"], c["x"])
    assert not torch.equal(a["x"], a["y"])


def test_scalar_inputs_pass_through():
    d = Definition.model_validate(_definition(inputs={"x": {"shape": ["A", "B"], "dtype": "float32"},
                                                      "alpha": {"shape": None, "dtype": "float32"}}))  # fmt: skip
    got = make_inputs(d, _workload(inputs={"alpha": {"type": "scalar", "value": 0.25}}), "cpu", seed=1)
    assert list(got) == ["x", "alpha"] and got["alpha"] == 0.25


def test_custom_inputs_come_from_the_reference():
    p = load_problem(corpus.problem_source("embedding_gather"))
    ref = load_reference(p.definition)
    w = p.workloads[0]
    a = make_inputs(p.definition, w, "cpu", seed=5, reference=ref)
    b = make_inputs(p.definition, w, "cpu", seed=5, reference=ref)
    c = make_inputs(p.definition, w, "cpu", seed=6, reference=ref)
    n = w.axes["N"]
    assert list(a) == ["table", "idx"] and a["table"].shape == (50, 16) and a["idx"].shape == (n,)
    assert a["idx"].dtype == torch.int64 and 0 <= int(a["idx"].min()) and int(a["idx"].max()) < 50
    assert torch.equal(a["table"], b["table"]) and torch.equal(a["idx"], b["idx"])
    assert not torch.equal(a["table"], c["table"])
    with pytest.raises(WorkloadError, match="custom"):
        make_inputs(p.definition, w, "cpu", seed=5, reference=None)


def test_safetensors_inputs_and_missing_key_or_file(tmp_path):
    pdir = corpus.materialize("scale_blob", tmp_path)
    t = read_safetensors(pdir / "blobs/w.safetensors", "w")
    assert t.dtype == torch.float32 and t.tolist() == [0.5, -1.25, 2.0, 3.5, -0.75, 1.0, 0.125, -2.5]
    with pytest.raises(KeyError):
        read_safetensors(pdir / "blobs/w.safetensors", "nope")
    p = load_problem(pdir)
    got = make_inputs(p.definition, p.workloads[0], "cpu", seed=1, ctx=InputContext(problem_dir=pdir))
    assert torch.equal(got["w"], t) and got["x"].shape == (2, 8)

    bad_key = p.workloads[0].model_copy(update={"inputs": {**p.workloads[0].inputs,
        "w": p.workloads[0].inputs["w"].model_copy(update={"tensor_key": "nope"})}})  # fmt: skip
    with pytest.raises(WorkloadError, match="nope") as e:
        make_inputs(p.definition, bad_key, "cpu", seed=1, ctx=InputContext(problem_dir=pdir))
    assert e.value.field == "inputs.w"

    # blobs resolve against a data root too; a missing one is an input error naming the blob
    root = tmp_path / "data"
    (root / "blobs").mkdir(parents=True)
    (pdir / "blobs/w.safetensors").rename(root / "blobs/w.safetensors")
    got = make_inputs(p.definition, p.workloads[0], "cpu", seed=1, ctx=InputContext(problem_dir=pdir, data_root=root))
    assert torch.equal(got["w"], t)
    with pytest.raises(WorkloadError, match="w.safetensors"):
        make_inputs(p.definition, p.workloads[0], "cpu", seed=1, ctx=InputContext(problem_dir=pdir))


# ------------------------------------------------------------------------------------------- models


def _solution(**over) -> dict:
    base = {"name": "s", "definition": "unit", "author": "me",
            "spec": {"languages": ["pytorch"], "entry_point": "k.py::run"},
            "sources": [{"path": "k.py", "content": "def run(x, out):\n    out.copy_(x)\n"}]}  # fmt: skip
    base.update(over)
    return base


def test_extra_keys_are_ignored():
    d = Definition.model_validate({**_definition(), "future_field": {"a": 1}, "hf_id": "org/model"})
    assert not hasattr(d, "future_field")
    s = Solution.model_validate({**_solution(), "unknown": 1, "spec": {**_solution()["spec"], "later": True}})
    assert s.spec.entry_function == "run"
    w = Workload.model_validate({"uuid": "w", "axes": {"A": 1}, "note": "x", "tolerance": {"max_atol": 0.5, "junk": 0}})
    assert w.tolerance.max_atol == 0.5


def test_constraints_are_checked(tmp_path):
    raw = _definition(constraints=["B % 4 == 0", "A <= B * 2"])
    d = Definition.model_validate(raw)
    assert d.resolve_axes({"A": 16}) == {"A": 16, "B": 8}
    with pytest.raises(ValueError, match="constraint"):
        d.resolve_axes({"A": 17})
    with pytest.raises(ValidationError, match="undefined axis"):
        Definition.model_validate(_definition(constraints=["Q == 1"]))
    with pytest.raises(ValidationError, match="comparison"):
        Definition.model_validate(_definition(constraints=["A + 1"]))
    path = tmp_path / "workload.jsonl"
    path.write_text(json.dumps({"uuid": "ok", "axes": {"A": 4}}) + "\n" + json.dumps({"uuid": "bad", "axes": {"A": 99}}) + "\n")
    with pytest.raises(WorkloadError, match="constraint") as e:
        load_workloads(path, d)
    assert ":2" in str(e.value) and e.value.field == "axes"


def test_run_signature_must_match_inputs():
    Definition.model_validate(_definition(reference="def run(x):\n    return x\n"))
    with pytest.raises(ValidationError, match="does not match"):
        Definition.model_validate(_definition(reference="def run(y):\n    return y\n"))
    with pytest.raises(ValidationError, match="does not match"):
        Definition.model_validate(_definition(reference="def run(x, extra):\n    return x\n"))
    with pytest.raises(ValidationError, match="no top-level run"):
        Definition.model_validate(_definition(reference="class K:\n    def run(self, x):\n        return x\n"))
    with pytest.raises(ValidationError, match="custom_inputs_entrypoint"):
        Definition.model_validate(_definition(custom_inputs_entrypoint="make"))


@pytest.mark.parametrize("path", ["../k.py", "a/../../k.py", "/abs/k.py", "\\win.py", "C:/x.py", ".hidden.py",
                                  "pkg/.secret/k.py", "a//b.py", ""])  # fmt: skip
def test_unsafe_source_paths_are_refused(path):
    sol = _solution()
    sol["sources"].append({"path": path, "content": "x = 1\n"})
    with pytest.raises(ValidationError):
        Solution.model_validate(sol)


def test_duplicate_sources_and_missing_entry_file_are_refused():
    sol = _solution()
    sol["sources"].append(dict(sol["sources"][0]))
    with pytest.raises(ValidationError, match="duplicate"):
        Solution.model_validate(sol)
    with pytest.raises(ValidationError, match="not among the sources"):
        Solution.model_validate(_solution(spec={"languages": ["pytorch"], "entry_point": "other.py::run"}))
    with pytest.raises(ValidationError, match="file::function"):
        Solution.model_validate(_solution(spec={"languages": ["pytorch"], "entry_point": "k.py"}))


def test_python_and_cpp_languages_do_not_mix():
    with pytest.raises(ValidationError, match="do not mix"):
        Solution.model_validate(_solution(spec={"languages": ["triton", "cuda_cpp"], "entry_point": "k.py::run"}))
    ok = Solution.model_validate(_solution(spec={"languages": ["cuda_cpp", "cutlass"], "entry_point": "k.py::run"}))
    assert ok.spec.is_cpp
    assert not Solution.model_validate(_solution(spec={"languages": ["triton", "pytorch"], "entry_point": "k.py::run"})).spec.is_cpp


def test_upstream_language_alias_is_accepted():
    s = Solution.model_validate(_solution(spec={"language": "triton", "entry_point": "k.py::run", "target_hardware": "H200"}))
    assert [lang.value for lang in s.spec.languages] == ["triton"] and s.spec.target_hardware == ["H200"]
    assert s.spec.destination_passing_style is True


# ------------------------------------------------------------------------------------------ sandbox


@pytest.mark.skipif(landlock_abi() == 0, reason="Landlock is not available on this kernel")
def test_sandbox_confines_writes_to_the_writable_dirs(tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    code = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from sol_bench.sandbox import SandboxPolicy, apply
        desc = apply(SandboxPolicy(writable=(Path({str(inside)!r}),)))
        res = {{"desc": desc}}
        for name, p in (("inside", Path({str(inside)!r}) / "f.txt"), ("outside", Path({str(outside)!r}) / "f.txt"),
                        ("repo", Path({str(REPO)!r}) / "sandbox_escape.txt")):
            try:
                p.write_text("x")
                res[name] = "written"
            except PermissionError:
                res[name] = "denied"
        print(json.dumps(res))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["desc"].startswith("landlock")
    assert res == {"desc": res["desc"], "inside": "written", "outside": "denied", "repo": "denied"}
    assert (inside / "f.txt").exists() and not (outside / "f.txt").exists()
    assert not (REPO / "sandbox_escape.txt").exists()


# ------------------------------------------------------------------------------------------ staging


def _py_solution(*paths: str) -> Solution:
    sources = [{"path": p, "content": "def run(x, out):\n    out.copy_(x)\n"} for p in paths]
    return Solution.model_validate(_solution(spec={"languages": ["pytorch"], "entry_point": f"{paths[0]}::run"},
                                             sources=sources))  # fmt: skip


@pytest.mark.parametrize("path", ["json.py", "os.py", "torch/__init__.py", "numpy.py", "sol_bench.py",
                                  "sitecustomize.py", "usercustomize.py", "pydantic/x.py", "triton.py"])  # fmt: skip
def test_check_shadowing_refuses_standard_judge_and_installed_names(path):
    with pytest.raises(RewardHack, match="shadow"):
        check_shadowing(_py_solution("kernel_xq.py", path))


def test_check_shadowing_accepts_private_names():
    check_shadowing(_py_solution("kernel_xq.py", "helpers_xq/util.py", "notes_xq.txt"))


# ----------------------------------------------------------------------------------- import hygiene


def test_sol_bench_imports_no_pipeline_package():
    code = textwrap.dedent("""
        import importlib, json, pkgutil, sys
        import sol_bench
        mods = [m.name for m in pkgutil.walk_packages(sol_bench.__path__, "sol_bench.") if m.name != "sol_bench.__main__"]
        for m in mods:
            importlib.import_module(m)
        banned = ("prefect", "dask", "distributed", "duckdb", "litellm", "great_expectations")
        bad = sorted(k for k in sys.modules if k.split(".")[0] in banned)
        print(json.dumps({"modules": mods, "banned": bad}))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.splitlines()[-1])
    assert {"sol_bench.judge", "sol_bench.worker", "sol_bench.cli", "sol_bench.inputs"} <= set(res["modules"])
    assert res["banned"] == []


# -------------------------------------------------------------------------------------------- replay

_RECORDER = """import hashlib
import torch


def run(x, weight, eps, y):
    h = hashlib.sha256()
    for t in (x, weight):
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    with open("seen.txt", "a") as f:
        f.write(h.hexdigest() + "\\n")
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(y.dtype))
"""


def test_recorded_seed_replays_identical_inputs(tmp_path):
    pdir = corpus.materialize("rmsnorm_small", tmp_path / "problems", first_workloads=1)
    problem = load_problem(pdir)
    sol = Solution.model_validate({"name": "recorder", "definition": "rmsnorm_small",
                                   "spec": {"languages": ["pytorch"], "entry_point": "rec.py::run"},
                                   "sources": [{"path": "rec.py", "content": _RECORDER}]})  # fmt: skip

    def seen(tag: str, seed: int | None) -> tuple[int, list[str]]:
        staging = tmp_path / tag
        traces = evaluate(problem, sol, fast_config(staging, seed=seed, iterations=3, time_reference=False))
        assert traces[0].evaluation.status is Status.PASSED, traces[0].evaluation.log[-2000:]
        (log,) = staging.glob("*/run/seen.txt")
        return traces[0].evaluation.seed, log.read_text().split()

    seed, first = seen("a", None)
    assert seed is not None and len(first) >= 5 and len(set(first)) > 1  # fresh content for every call
    replay_seed, replay = seen("b", seed)
    assert replay_seed == seed and replay == first
    _, other = seen("c", seed + 1)
    assert not set(other) & set(first)


def test_preroll_calibration_waits_for_the_clock_to_settle():
    """A GPU at idle clocks spins the probe slowly; calibrating on those first probes would make the pre-roll
    several times too short once the clock is up (the judge's worker calibrates right after CUDA starts)."""
    from sol_bench.timing import settled_probe_ms

    ramp = iter([0.58, 0.45, 0.30, 0.18, 0.104, 0.101, 0.102, 0.5, 0.5])
    assert settled_probe_ms(lambda: next(ramp)) == 0.101
    steady = iter([0.1, 0.1, 0.1] + [9.9] * 10)
    assert settled_probe_ms(lambda: next(steady)) == 0.1  # stops as soon as three agree
    noisy = [0.1, 0.2] * 40
    calls = []
    assert settled_probe_ms(lambda: (calls.append(1), noisy[len(calls) - 1])[1], max_probes=10) == 0.1
    assert len(calls) == 10  # never settles: gives up after max_probes, fastest of the last three


def test_launch_preroll_cycles_scale_with_the_probe():
    from sol_bench.timing import cuda_method, preroll_cycles

    # a probe of 200k cycles that took 0.1 ms: 2000 cycles per microsecond
    assert preroll_cycles(20.0, 200_000, 0.1) == 40_000
    assert preroll_cycles(5.0, 200_000, 0.2) == 5_000
    assert preroll_cycles(0.0, 200_000, 0.1) == 0
    assert preroll_cycles(0.001, 200_000, 1000.0) == 1  # never a zero-length spin when asked for one
    with pytest.raises(ValueError):
        preroll_cycles(20.0, 200_000, 0.0)
    assert cuda_method(20.0) == "cuda_events+device_sync+preroll20us"
    assert cuda_method(0.0) == "cuda_events+device_sync"


def test_worker_is_started_with_the_configured_launch_preroll(tmp_path, monkeypatch):
    """The pre-roll reaches the candidate's worker as an argument (its timer is made before load)."""
    from sol_bench import runner
    from sol_bench.staging import stage

    seen = {}

    class Stop(Exception):
        pass

    def fake_popen(argv, **kw):
        seen["argv"] = argv
        raise Stop

    monkeypatch.setattr(runner.subprocess, "Popen", fake_popen)
    sol = Solution.model_validate({
        "name": "s", "definition": "d", "author": "a",
        "spec": {"languages": ["pytorch"], "entry_point": "m.py::run"},
        "sources": [{"path": "m.py", "content": "def run(x):\n    return x\n"}],
    })  # fmt: skip
    staged = stage(sol, tmp_path)
    with pytest.raises(Stop):
        runner.start_worker(staged, "cpu", "m.py", "run", False, None, {}, 5.0, 0, 12.5)
    argv = seen["argv"]
    assert argv[argv.index("--preroll-us") + 1] == "12.5"
    assert argv[argv.index("--preroll-kind") + 1] == "stream"
    with pytest.raises(Stop):
        runner.start_worker(staged, "cpu", "m.py", "run", False, None, {}, 5.0, 0, 12.5, preroll_kind="device")
    argv = seen["argv"]
    assert argv[argv.index("--preroll-kind") + 1] == "device"


def test_builds_run_below_normal_priority(tmp_path):
    """A build's compilers run niced: on a GPU machine they share the CPU with candidates being timed."""
    import os

    from sol_bench.build import plan_build, run_build
    from sol_bench.build_worker import BUILD_NICENESS
    from sol_bench.models import Solution
    from sol_bench.runner import candidate_env
    from sol_bench.staging import stage

    sol = Solution.model_validate({
        "name": "nice_probe", "definition": "d", "author": "t",
        "spec": {"languages": ["cuda_cpp"], "entry_point": "k.cu::run", "destination_passing_style": True},
        "sources": [{"path": "k.cu", "content": "__global__ void probe_kernel(int* p) { *p = 1; }\n"}],
    })  # fmt: skip
    staged = stage(sol, tmp_path)  # no GPU here: CUDA sources are compiled only (nvcc, sm_90a)
    result = run_build(plan_build(sol, staged, "cpu", candidate_env(staged, "cpu")), 120)
    expected = min(19, os.nice(0) + BUILD_NICENESS)
    assert f"niceness: {expected}" in result.log.splitlines()


def test_worker_buffer_sets_copy_in_and_out_around_a_call():
    """``private``: the candidate gets tensors of its own process, filled from the judge's before each call
    (inputs and the poisoned outputs) and copied back after it, outputs and inputs both, so the judge's checks
    see a skipped output as NaN and a modified input as modified; ``shared`` hands over the judge's tensors."""
    from sol_bench.worker import BufferSets

    def shared_set():
        return [torch.arange(6, dtype=torch.float32).reshape(2, 3), 1e-6], [torch.full((2, 3), float("nan"))]

    inputs, outputs = shared_set()
    sets = BufferSets("shared")
    sets.register(0, inputs, outputs)
    assert sets.args(0)[0][0] is inputs[0] and sets.args(0)[1][0] is outputs[0]

    inputs, outputs = shared_set()
    sets = BufferSets("private")
    sets.register(0, inputs, outputs)
    (x, eps), (y,) = sets.args(0)
    assert eps == 1e-6 and x.data_ptr() != inputs[0].data_ptr() and y.data_ptr() != outputs[0].data_ptr()
    assert x.shape == inputs[0].shape and x.stride() == inputs[0].stride() and y.dtype == outputs[0].dtype
    sets.stage(0)
    assert torch.equal(x, inputs[0]) and torch.isnan(y).all()  # the poison reaches the candidate's output
    y.copy_(x * 2)
    x[0, 0] = 100.0  # the candidate modifies an input
    assert torch.isnan(outputs[0]).all() and inputs[0][0, 0] == 0  # nothing reaches the judge until published
    sets.publish(0)
    assert torch.equal(outputs[0], y) and inputs[0][0, 0] == 100.0  # the judge's input check will see it
    inputs[0].fill_(3.0)  # the judge refills: the next call sees the new inputs, not the old copy
    sets.stage(0)
    assert (x == 3.0).all()
    with pytest.raises(ValueError, match="buffers"):
        BufferSets("pinned")


def test_the_reference_process_starts_while_the_candidate_is_checked(tmp_path, monkeypatch):
    """The reference's worker is spawned once the candidate's is ready, so its start (importing torch, setting
    up the device) overlaps the candidate's correctness rounds; it is made ready only when first timed. The
    evaluation is unchanged: every workload passes and no worker outlives it."""
    from sol_bench import judge

    events: list[str] = []
    spawn, rounds, handshake = judge.spawn_worker, judge.correctness_rounds, judge.handshake

    def spawned(staged, *args, **kwargs):
        worker = spawn(staged, *args, **kwargs)
        events.append(f"spawn {worker.pid}")
        return worker

    def ready(worker):
        events.append(f"ready {worker.pid}")
        return handshake(worker)

    def checked(buf, n):
        events.append("correctness")
        return rounds(buf, n)

    monkeypatch.setattr(judge, "spawn_worker", spawned)
    monkeypatch.setattr(judge, "handshake", ready)
    monkeypatch.setattr(judge, "correctness_rounds", checked)
    problem = load_problem(corpus.materialize("rmsnorm_small", tmp_path / "p", first_workloads=1))
    sol = Solution.model_validate_json((Path(__file__).parent / "fixtures/solutions/rmsnorm_pytorch.json").read_text())
    traces = evaluate(problem, sol.model_copy(update={"definition": problem.name}), fast_config(tmp_path / "staging"))
    assert [t.evaluation.status for t in traces] == [Status.PASSED]
    cand, ref = [e.split()[1] for e in events if e.startswith("spawn")]
    assert events == [f"spawn {cand}", f"ready {cand}", f"spawn {ref}", "correctness", f"ready {ref}"]
    for pid in (cand, ref):
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
