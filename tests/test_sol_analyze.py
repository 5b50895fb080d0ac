"""Hand-computed MACs, bytes and B200 times of the speed-of-light analyzer."""

from __future__ import annotations

import time

import pytest
import torch

from sol_bench.models import Definition, Workload
from sol_bench.problem import load_problem
from sol_bench.sol import SolAnalysisError, analyze_problem, analyze_workload, get_hardware
from sol_bench.sol.hardware import B200, H200, Precision
from sol_bench.sol.macs import causal_pairs

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "problems"

B200_BW = 5111.6 * 1.5e9
B200_BF16 = 603_751 * 1.5e9
B200_FP8 = 1_207_501 * 1.5e9
B200_FLOOR_MS = 0.4e-3  # the leaderboard's B200 table adds 0.4 us to every roofline


def make(inputs: dict, outputs: dict, reference: str, axes: dict | None = None, custom: str | None = None) -> Definition:
    return Definition.model_validate(
        {
            "name": "t",
            "axes": axes or {},
            "inputs": inputs,
            "outputs": outputs,
            "reference": reference,
            "custom_inputs_entrypoint": custom,
        }
    )


def wl(inputs: dict | None = None, axes: dict | None = None) -> Workload:
    return Workload.model_validate({"uuid": "w", "axes": axes or {}, "inputs": inputs or {}})


def spec(shape, dtype="bfloat16"):
    return {"shape": shape, "dtype": dtype}


MATMUL_REF = "import torch\ndef run(a, b):\n    return a @ b\n"


def test_matmul_macs_bytes_and_b200_times():
    d = make({"a": spec(["128", "256"]), "b": spec(["256", "64"])}, {"c": spec(["128", "64"])}, MATMUL_REF)
    r = analyze_workload(d, wl(), B200)
    assert r.macs == 128 * 256 * 64
    assert r.bytes == 2 * (128 * 256 + 256 * 64 + 128 * 64) == 114_688
    assert r.precision is Precision.bf16
    assert r.t_compute_ms == pytest.approx(2_097_152 / B200_BF16 * 1e3)
    assert r.t_memory_ms == pytest.approx(114_688 / B200_BW * 1e3)
    assert r.bound == "memory" and r.t_sol_ms == pytest.approx(r.t_memory_ms + B200_FLOOR_MS)


def test_square_bf16_matmul_is_compute_bound_on_b200_by_hand():
    n = 4096
    d = make({"a": spec([str(n)] * 2), "b": spec([str(n)] * 2)}, {"c": spec([str(n)] * 2)}, MATMUL_REF)
    r = analyze_workload(d, wl(), B200)
    # 4096^3 / (603,751 MAC/cycle * 1.5 GHz) = 75.88 us (+ 0.4 us floor); 3 * 32 MiB / 7.667 TB/s = 13.13 us
    assert r.t_sol_ms == pytest.approx(0.075880 + 0.0004, rel=1e-4)
    assert r.t_memory_ms == pytest.approx(0.013129, rel=1e-3)
    assert r.bound == "compute"


def test_linear_with_bias_counts_weights_once_and_fp32_priced_at_bf16_on_b200():
    ref = "import torch.nn.functional as F\ndef run(x, w, b):\n    return F.relu(F.linear(x, w, b)) + F.linear(x, w, b)\n"
    d = make(
        {"x": spec(["32", "512"], "float32"), "w": spec(["1024", "512"], "float32"), "b": spec(["1024"], "float32")},
        {"y": spec(["32", "1024"], "float32")},
        ref,
    )
    r = analyze_workload(d, wl(), B200)
    assert r.macs == 2 * 32 * 512 * 1024
    elements = 32 * 512 + 1024 * 512 + 1024 + 32 * 1024
    # The leaderboard's B200 table prices an all-fp32 problem wholly as 16-bit: MAC rate and 2 B per element.
    assert r.bytes == 2 * elements
    assert r.input_bytes["w"] == 4 * 1024 * 512  # what the trace saw stays physical
    assert r.precision is Precision.fp32
    assert r.t_compute_ms == pytest.approx(r.macs / B200_BF16 * 1e3)
    assert analyze_workload(d, wl(), H200).bytes == 4 * elements  # vendor models keep each tensor's width


def test_fp32_tensors_of_a_16_bit_problem_keep_their_width_on_b200():
    ref = "import torch\ndef run(x, s):\n    return (x.float() * s).to(torch.bfloat16)\n"
    d = make({"x": spec(["64", "256"]), "s": spec(["64", "256"], "float32")}, {"y": spec(["64", "256"])}, ref)
    r = analyze_workload(d, wl(), B200)
    assert r.precision is Precision.bf16
    assert r.bytes == 64 * 256 * (2 + 4 + 2)


ATTN_REF = (
    "import torch.nn.functional as F\n"
    "def run(q, k, v):\n"
    "    return F.scaled_dot_product_attention(q, k, v, is_causal={causal})\n"
)


@pytest.mark.parametrize("causal", [False, True])
def test_batched_attention(causal):
    shape = ["2", "4", "128", "64"]
    d = make({"q": spec(shape), "k": spec(shape), "v": spec(shape)}, {"o": spec(shape)}, ATTN_REF.format(causal=causal))
    r = analyze_workload(d, wl(), B200)
    pairs = 128 * 129 // 2 if causal else 128 * 128
    assert r.macs == 2 * 4 * pairs * (64 + 64)
    assert r.macs == (8_454_144 if causal else 16_777_216)
    assert r.bytes == 4 * (2 * 4 * 128 * 64 * 2)
    assert r.precision is Precision.bf16


def test_causal_pairs_rectangular():
    assert causal_pairs(4, 8) == 1 + 2 + 3 + 4
    assert causal_pairs(8, 4) == 1 + 2 + 3 + 4 + 4 * 4
    assert causal_pairs(1, 1) == 1


def test_gqa_attention_and_hand_written_attention():
    d = make(
        {"q": spec(["1", "8", "16", "32"]), "k": spec(["1", "2", "64", "32"]), "v": spec(["1", "2", "64", "32"])},
        {"o": spec(["1", "8", "16", "32"])},
        "import torch.nn.functional as F\ndef run(q, k, v):\n"
        "    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)\n",
    )
    r = analyze_workload(d, wl(), B200)
    assert r.macs == 8 * 16 * 64 * (32 + 32)
    assert r.bytes == 2 * (8 * 16 * 32 * 2 + 2 * 2 * 64 * 32)
    manual = make(
        {"q": spec(["3", "16", "32"]), "k": spec(["3", "24", "32"]), "v": spec(["3", "24", "8"])},
        {"o": spec(["3", "16", "8"])},
        "import torch\ndef run(q, k, v):\n    s = (q @ k.transpose(-1, -2)).float().softmax(-1)\n    return s.to(q.dtype) @ v\n",
    )
    r = analyze_workload(manual, wl(), B200)
    assert r.macs == 3 * 16 * 24 * 32 + 3 * 16 * 24 * 8


def test_rmsnorm_fixture_bytes():
    problem = load_problem(FIXTURES / "rmsnorm_small")
    results = {r.uuid: r for r in analyze_problem(problem, B200)}
    # x and y: T x 256 bf16 each; weight 256 bf16; the fp32 eps is a scalar and moves nothing.
    for uuid, t in (("rms-1", 1), ("rms-7", 7), ("rms-64", 64)):
        assert results[uuid].macs == 0
        assert results[uuid].bytes == 2 * t * 256 * 2 + 256 * 2
        assert results[uuid].precision is Precision.bf16
        assert results[uuid].bound == "memory"
    assert results["rms-64"].t_sol_ms == pytest.approx(66_048 / B200_BW * 1e3 + B200_FLOOR_MS)
    assert analyze_problem(problem, H200)[2].t_sol_ms == pytest.approx(66_048 / 4.8e12 * 1e3)  # no floor there


def test_embedding_gather_reads_only_gathered_rows():
    d = make(
        {"ids": spec(["16"], "int64"), "table": spec(["100000", "64"])},
        {"y": spec(["16", "64"])},
        "import torch.nn.functional as F\ndef run(ids, table):\n    return F.embedding(ids, table)\n",
    )
    r = analyze_workload(d, wl(), B200)
    assert r.bytes == 16 * 8 + 16 * 64 * 2 + 16 * 64 * 2
    assert r.input_bytes["table"] == 16 * 64 * 2


def test_scatter_into_cache_counts_written_values_only():
    d = make(
        {"cache": spec(["4096", "128"]), "slots": spec(["8"], "int64"), "new": spec(["8", "128"])},
        {"out": spec(["4096", "128"])},
        "def run(cache, slots, new):\n    cache.index_copy_(0, slots, new)\n    return cache\n",
    )
    r = analyze_workload(d, wl(), B200)
    assert r.bytes == 8 * 8 + 8 * 128 * 2 + 8 * 128 * 2  # slots + new read, 8 rows written


MOE_REF = """
import torch

def make_inputs(axes, device):
    T, D, N, E, K = axes["T"], axes["D"], axes["N"], axes["E"], axes["K"]
    ids = (torch.arange(T * K, device=device) % E).reshape(T, K)
    return {"x": torch.randn(T, D, device=device, dtype=torch.bfloat16), "ids": ids,
            "w": torch.randn(E, N, D, device=device, dtype=torch.bfloat16)}

def run(x, ids, w):
    out = torch.zeros(x.shape[0], w.shape[1], device=x.device, dtype=torch.float32)
    for e in range(w.shape[0]):
        tok, slot = (ids == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        out.index_add_(0, tok, (x[tok] @ w[e].t()).float())
    return out.to(x.dtype)
"""


def moe_definition() -> Definition:
    return make(
        {"x": spec(["T", "D"]), "ids": spec(["T", "K"], "int64"), "w": spec(["E", "N", "D"])},
        {"y": spec(["T", "N"])},
        MOE_REF,
        axes={"T": {"type": "var"}, "D": {"type": "const", "value": 64}, "N": {"type": "const", "value": 32},
              "E": {"type": "const", "value": 4}, "K": {"type": "const", "value": 2}},  # fmt: skip
        custom="make_inputs",
    )


def test_moe_gather_grouped_matmul_runs_on_real_inputs():
    d = moe_definition()
    w = Workload.model_validate(
        {"uuid": "m", "axes": {"T": 8}, "inputs": {"x": {"type": "custom"}, "ids": {"type": "custom"}, "w": {"type": "custom"}}}
    )
    r = analyze_workload(d, w, B200)
    assert r.method == "real"
    assert r.macs == 8 * 2 * 64 * 32  # every (token, slot) pair meets one expert: T*K*D*N
    # x gathered 16 rows (capped at its 8 rows), all 4 experts used, ids read, y written.
    assert r.bytes == 8 * 64 * 2 + 8 * 2 * 8 + 4 * 32 * 64 * 2 + 8 * 32 * 2
    with pytest.raises(SolAnalysisError, match="meta"):
        analyze_workload(d, w, B200, real_device=None)
    # Over the cap, x and w live on meta while the ids (real) still route: the same count.
    mixed = analyze_workload(d, w, B200, real_cap_bytes=1024)
    assert mixed.method == "mixed" and (mixed.macs, mixed.bytes) == (r.macs, r.bytes)


def test_fp8_scaled_matmul():
    d = make(
        {"a": spec(["64", "128"], "float8_e4m3fn"), "b": spec(["256", "128"], "float8_e4m3fn"),
         "sa": spec([], "float32"), "sb": spec([], "float32")},  # fmt: skip
        {"c": spec(["64", "256"])},
        "import torch\ndef run(a, b, sa, sb):\n"
        "    return torch._scaled_mm(a, b.t(), sa, sb, out_dtype=torch.bfloat16)\n",
    )
    r = analyze_workload(d, wl(), B200)
    assert r.macs == 64 * 256 * 128
    assert r.precision is Precision.fp8
    assert r.bytes == 64 * 128 + 256 * 128 + 4 + 4 + 64 * 256 * 2
    assert r.t_compute_ms == pytest.approx(64 * 256 * 128 / B200_FP8 * 1e3)


def test_reference_that_quantises_to_fp8_is_priced_at_fp8():
    d = make(
        {"x": spec(["64", "128"]), "w": spec(["32", "128"])},
        {"y": spec(["64", "32"])},
        "import torch\ndef run(x, w):\n"
        "    xq = x.to(torch.float8_e4m3fn).to(x.dtype)\n    return xq @ w.t()\n",
    )
    assert analyze_workload(d, wl(), B200).precision is Precision.fp8


def test_packed_fp4_input_counts_half_a_byte():
    ref = (
        "import torch\ndef run(x, w):\n"
        "    lo = (w & 15).to(x.dtype)\n    hi = (w >> 4).to(x.dtype)\n"
        "    wf = torch.stack([lo, hi], dim=-1).reshape(w.shape[0], -1)\n    return x @ wf.t()\n"
    )
    d = make({"x": spec(["16", "256"]), "w": spec(["64", "256"], "float4_e2m1")}, {"y": spec(["16", "64"])}, ref)
    r = analyze_workload(d, wl(), B200)
    assert r.input_bytes["w"] == 64 * 256 // 2
    assert r.bytes == 16 * 256 * 2 + 64 * 256 // 2 + 16 * 64 * 2
    assert r.macs == 16 * 64 * 256
    assert r.precision is Precision.nvfp4
    assert r.t_compute_ms == pytest.approx(r.macs / (2_415_000 * 1.5e9) * 1e3)
    assert H200.mac_rate(Precision.nvfp4) == H200.mac_rate(Precision.fp8)  # no fp4 on Hopper


def test_conv2d_macs():
    d = make(
        {"x": spec(["2", "8", "16", "16"]), "w": spec(["4", "8", "3", "3"])},
        {"y": spec(["2", "4", "14", "14"])},
        "import torch.nn.functional as F\ndef run(x, w):\n    return F.conv2d(x, w)\n",
    )
    assert analyze_workload(d, wl(), B200).macs == 2 * 4 * 14 * 14 * 8 * 9


def test_hard_coded_cuda_device_and_huge_shapes_analyse_fast_without_memory():
    n = 65536  # three 8 GiB matrices: only meta tensors can hold them here
    ref = "import torch\ndef run(a, b):\n    bias = torch.zeros(a.shape[0], device='cuda')\n    return (a.cuda() @ b) + bias[:, None]\n"
    d = make({"a": spec([str(n)] * 2), "b": spec([str(n)] * 2)}, {"c": spec([str(n)] * 2)}, ref)
    t0 = time.perf_counter()
    r = analyze_workload(d, wl(), B200, real_device=None)
    assert time.perf_counter() - t0 < 1.0
    assert r.macs == n**3
    assert r.bytes == 3 * n * n * 2


def test_get_hardware_names():
    assert get_hardware("b200") is B200
    assert get_hardware("H200").bandwidth_bytes_per_s == 4.8e12
    assert B200.mac_rate(Precision.fp32) == B200.mac_rate(Precision.bf16) == B200_BF16
    assert B200.bandwidth_bytes_per_s == pytest.approx(7.6674e12)
    with pytest.raises(ValueError, match="unknown hardware"):
        get_hardware("A100")


def test_measured_profile_is_probed_once_and_cached(tmp_path):
    m = get_hardware("auto", device="cpu", cache_dir=tmp_path)
    assert m.name.startswith("measured cpu")
    assert m.bandwidth_bytes_per_s > 1e8 and m.mac_rate(Precision.bf16) > 1e7
    cached = list((tmp_path / "hardware").glob("*.json"))
    assert len(cached) == 1
    assert get_hardware("measured", device="cpu", cache_dir=tmp_path) == m


def test_unanalysable_reference_says_why():
    d = make({"x": spec(["4"])}, {"y": spec(["4"])}, "def run(x):\n    raise RuntimeError('boom')\n")
    with pytest.raises(SolAnalysisError, match="boom"):
        analyze_workload(d, wl(), B200)
    assert torch.get_default_device() == torch.device("cpu")
