"""Honest solutions of the judge corpus pass on the CPU; C++ sources build (CPU) or compile for sm_90a (CUDA)."""

from __future__ import annotations

import shutil

import pytest

from judge_corpus import corpus
from judge_corpus.harness import fast_config, run_entry
from sol_bench.models import Status

PY_HONEST = [e for e in corpus.entries("honest") if "pytorch" in e.spec["languages"] or "triton" in e.spec["languages"]]


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    return tmp_path_factory.mktemp("staging")


@pytest.mark.parametrize("entry", PY_HONEST, ids=lambda e: e.name)
def test_honest_python_solution_passes(entry, tmp_path, staging):
    traces, _ = run_entry(entry, tmp_path, staging)
    assert len(traces) == len((corpus.problem_source(entry.problem) / "workload.jsonl").read_text().splitlines())
    for t in traces:
        ev = t.evaluation
        assert ev.status is entry.expected("cpu", t.workload.uuid), (ev.reason, ev.log[-2000:])
        assert ev.correctness.rounds == 2 and ev.correctness.timed_runs_checked >= 1
        assert ev.performance.latency_ms > 0 and ev.performance.iterations == 5
        assert ev.t_sol_ms is not None and ev.sol_hardware == "B200"
        assert ev.environment.sandbox.startswith(("landlock", "none"))


def test_triton_runs_interpreted_in_the_sandbox(tmp_path, staging):
    traces, _ = run_entry(corpus.entry("honest", "softmax_triton"), tmp_path, staging, first_workloads=1)
    assert [t.evaluation.status for t in traces] == [Status.PASSED], traces[0].evaluation.log


def test_seed_is_recorded_and_replays_identically(tmp_path, staging):
    e = corpus.entry("cheats", "cache_first_result")  # fails with numbers that depend on the inputs only
    first, pdir = run_entry(e, tmp_path / "a", staging, first_workloads=1)
    seed = first[0].evaluation.seed
    assert seed is not None
    again, _ = run_entry(e, tmp_path / "b", staging, first_workloads=1, config=fast_config(staging, seed=seed))
    other, _ = run_entry(e, tmp_path / "c", staging, first_workloads=1, config=fast_config(staging, seed=seed + 1))
    assert again[0].evaluation.seed == seed
    assert again[0].evaluation.correctness == first[0].evaluation.correctness
    assert other[0].evaluation.correctness != first[0].evaluation.correctness


def test_second_evaluate_in_one_process_keeps_the_shm_manager(tmp_path, staging):
    """Bug: kill_tree ended torch's shared-memory manager (started lazily, after the worker) -> 'Broken pipe'."""
    e = corpus.entry("honest", "matmul_fp32_return")
    for i in range(2):
        traces, _ = run_entry(e, tmp_path / str(i), staging, first_workloads=1)
        assert traces[0].evaluation.status is Status.PASSED


def test_zero_dim_input_is_checked_for_mutation(tmp_path, staging):
    """Bug: the input-mutation check viewed a 0-d tensor as bytes and raised (fp8_dequant has a 0-d scale)."""
    traces, _ = run_entry(corpus.entry("honest", "fp8_dequant"), tmp_path, staging, first_workloads=1)
    assert traces[0].evaluation.status is Status.PASSED


# ----------------------------------------------------------------------------------------------- C++

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.fixture(scope="module")
def cpp_staging(tmp_path_factory):
    return tmp_path_factory.mktemp("cpp-staging")  # shared: the judge caches builds by source hash


@pytest.mark.cuda_compile
@pytest.mark.slow
def test_cpu_torch_extension_builds_and_passes(tmp_path, cpp_staging):
    traces, _ = run_entry(corpus.entry("honest", "softmax_cpp"), tmp_path, cpp_staging,
                          config=fast_config(cpp_staging, compile_timeout_s=280))  # fmt: skip
    assert [t.evaluation.status for t in traces] == [Status.PASSED] * 2, (
        [t.evaluation.reason for t in traces], [t.evaluation.log[-1500:] for t in traces]
    )  # a CI run once saw REWARD_HACK on the second workload: say which check fired
    assert traces[0].evaluation.phase_seconds["compile"] > 0


@pytest.mark.cuda_compile
@pytest.mark.slow
@needs_nvcc
def test_cuda_solution_with_inline_ptx_compiles_for_sm90a_only(tmp_path, cpp_staging):
    traces, _ = run_entry(corpus.entry("honest", "swiglu_cuda"), tmp_path, cpp_staging,
                          config=fast_config(cpp_staging, compile_timeout_s=280))  # fmt: skip
    for t in traces:
        assert t.evaluation.status is Status.RUNTIME_ERROR, t.evaluation.log
        assert t.evaluation.reason.startswith("compiled only"), t.evaluation.reason
    objects = list(cpp_staging.glob("*/build/swiglu_kernel.cu.o"))
    assert objects and objects[0].stat().st_size > 0


@pytest.mark.cuda_compile
@needs_nvcc
def test_broken_cuda_source_gives_compile_error_with_the_compiler_message(tmp_path, cpp_staging):
    traces, _ = run_entry(corpus.entry("honest", "swiglu_cuda_broken"), tmp_path, cpp_staging,
                          config=fast_config(cpp_staging, compile_timeout_s=280))  # fmt: skip
    assert {t.evaluation.status for t in traces} == {Status.COMPILE_ERROR}
    assert "undeclared_identifier_xyz" in traces[0].evaluation.log


def test_a_candidates_exception_is_its_reason_not_the_tracebacks_first_line():
    """A candidate that raises: the trace's one-line reason is the exception (``RuntimeError: ...``), the last
    unindented line of the traceback, not "Traceback (most recent call last):", nor the candidate's own output the
    runner appends."""
    import traceback

    from sol_bench.judge import _first_line
    from sol_bench.runner import failure

    def launch():
        try:
            raise KeyError("n_cols")
        except KeyError as inner:
            raise RuntimeError("row too long for this template: 7168") from inner

    try:
        launch()
    except RuntimeError as e:
        text = "".join(traceback.format_exception(e))
    err = failure(["fail", "runtime", text], "solforge tuned [(1, 7168)]: keeps compile\nwarning: slow\n")
    assert _first_line(str(err)) == "RuntimeError: row too long for this template: 7168"
    assert _first_line("build failed\nnvcc: error") == "build failed"  # not a traceback: its first line
    assert _first_line("") == ""
