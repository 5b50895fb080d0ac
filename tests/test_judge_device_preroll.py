"""The device-wide launch pre-roll: its launch shape fills every SM, its kernel builds, and the judge takes
the choice through its config, CLI and worker. (Launching it needs a GPU: bench/judge_gpu_suite.py
--preroll-kind device.)"""

from __future__ import annotations

import pytest

from sol_bench.device_preroll import SOURCE, THREADS, compile_cubin, geometry
from sol_bench.judge import JudgeConfig
from sol_bench.timing import CudaTimer, cuda_method


def test_geometry_takes_every_thread_slot_and_all_shared_memory_of_every_sm():
    # H100/H200: 132 SMs, 2048 threads and 228 KiB of shared memory per SM, 1 KiB reserved per block
    g = geometry(132, 2048, 233472, 1024, 232448)
    assert g.threads == THREADS and g.blocks == 264  # two 1024-thread blocks per SM: 2048 of 2048 slots
    assert 2 * (g.shared_bytes + 1024) == 233472  # nothing left for another kernel's block
    # an SM that holds 1536 threads (sm_86): one block, and all shared memory but the reserve
    g = geometry(84, 1536, 102400, 1024, 101376)
    assert (g.blocks, g.shared_bytes) == (84, 101376)
    with pytest.raises(ValueError, match="no device-wide pre-roll"):
        geometry(0, 2048, 233472, 1024, 232448)


def test_kernel_spins_on_the_global_timer_and_builds_for_sm90():
    assert "%%globaltimer" in SOURCE and "extern __shared__" in SOURCE
    pytest.importorskip("cuda.bindings.nvrtc")  # the gpu extra, which the README's setup installs
    cubin = compile_cubin("sm_90")
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000


def test_preroll_kind_is_validated_and_named_in_the_timing_method():
    with pytest.raises(ValueError, match="preroll_kind"):
        JudgeConfig(preroll_kind="grid")
    assert JudgeConfig(preroll_kind="device").preroll_kind == "device"
    assert cuda_method(20.0, "device") == "cuda_events+device_sync+devicepreroll20us"
    assert cuda_method(20.0, "stream") == "cuda_events+device_sync+preroll20us"
    with pytest.raises(ValueError, match="pre-roll kind"):
        CudaTimer(None, 20.0, "grid")  # refused before touching any device


def test_cli_passes_the_preroll_kind(tmp_path, monkeypatch):
    from sol_bench import cli

    seen = {}

    def fake_run_eval(*args, **kw):
        seen.update(kw)
        return 0

    monkeypatch.setattr(cli, "run_eval", fake_run_eval)
    assert cli.main(["eval", str(tmp_path), "--solution", str(tmp_path / "s.json"), "--preroll-kind", "device"]) == 0
    assert seen["preroll_kind"] == "device"
    with pytest.raises(SystemExit):
        cli.main(["eval", str(tmp_path), "--solution", str(tmp_path / "s.json"), "--preroll-kind", "grid"])
