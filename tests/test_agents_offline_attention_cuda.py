"""The CUDA decode-attention template (one query per sequence, GQA, tensor cores): where the agent puts it,
what it renders and refuses, that nvcc builds it for sm_90a, and a lane-level CPU emulation of its kernels.

No GPU here: the emulation replays the kernel's per-lane register contents (fragment layouts of
mma.m16n8k16 and movmatrix as the PTX ISA defines them, the permuted head-dim order, __byte_perm repacking,
the shuffles, the split heuristic and both merges) with torch on the CPU and compares with the reference.
It mirrors the CUDA source statement by statement; keep the two in step.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from agents.offline.agent import OfflineAgent, plan
from agents.offline.graph import trace_ops
from agents.offline.templates import attention, build_solution
from agents.offline.templates.attention import ATTENTION, CUDA_DECODE_MAX_SPLITS, CUDA_DECODE_TILE, semantics
from agents.offline.templates.base import Binding
from sol_bench.problem import load_problem

REPO = Path(__file__).resolve().parents[1]
BUNDLED = [REPO / "data" / "problems" / "L1" / f"decode_attention_q{h}_kv8_d128_bf16" for h in (32, 64)]
CUDA = next(r for r in ATTENTION.renderers if r.language == "cuda_cpp")

_REF = ("import torch\n\ndef run(q, k, v):\n"
        "    g = q.shape[{h}] // k.shape[{kh}]\n"
        "    qq, kk, vv = {to_bhsd}\n"
        "    kk, vv = {rep}\n"
        "    s = (qq @ kk.transpose(-1, -2)).float() * q.shape[-1] ** -0.5\n"
        "    return {back}\n")  # fmt: skip


def write_decode(root: Path, name: str, *, layout: str = "bhd", dtype: str = "bfloat16", h: int = 8, hk: int = 2,
                 d: int = 64, gqa: str = "interleave", sq: int = 1, lens: tuple[int, ...] = (77, 301)) -> Path:
    """A decode-attention problem in one of the template's layouts (B and L vary over the workloads)."""
    rep = ("kk.repeat_interleave(g, 1), vv.repeat_interleave(g, 1)" if gqa == "interleave"
           else "kk.repeat(1, g, 1, 1), vv.repeat(1, g, 1, 1)")  # fmt: skip
    probs = "(torch.softmax(s, -1).to(q.dtype) @ vv)"
    if layout == "bhd":
        shapes = (["B", "H", "D"], ["B", "HK", "L", "D"])
        ref = _REF.format(h=1, kh=1, to_bhsd="q.unsqueeze(2), k, v", rep=rep, back=probs + ".squeeze(2)")
    elif layout == "bhsd":
        shapes = (["B", "H", "S", "D"], ["B", "HK", "L", "D"])
        ref = _REF.format(h=1, kh=1, to_bhsd="q, k, v", rep=rep, back=probs)
    else:  # bshd
        shapes = (["B", "S", "H", "D"], ["B", "L", "HK", "D"])
        ref = _REF.format(h=2, kh=2, to_bhsd="q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)", rep=rep,
                          back=probs + ".transpose(1, 2)")  # fmt: skip
    axes = {"B": {"type": "var"}, "L": {"type": "var"}, "H": {"type": "const", "value": h},
            "HK": {"type": "const", "value": hk}, "D": {"type": "const", "value": d}}  # fmt: skip
    if layout != "bhd":
        axes["S"] = {"type": "const", "value": sq}
    out = root / name
    out.mkdir(parents=True)
    definition = {
        "name": name, "reference": ref, "axes": axes,
        "inputs": {"q": {"shape": shapes[0], "dtype": dtype}, "k": {"shape": shapes[1], "dtype": dtype},
                   "v": {"shape": shapes[1], "dtype": dtype}},
        "outputs": {"o": {"shape": shapes[0], "dtype": dtype}},
    }  # fmt: skip
    (out / "definition.json").write_text(json.dumps(definition))
    wls = [{"uuid": f"{name}-{i}", "axes": {"B": 1 + i, "L": n}, "inputs": {x: {"type": "random"} for x in "qkv"},
            "tolerance": {"max_atol": 2e-2, "max_rtol": 2e-2}} for i, n in enumerate(lens)]  # fmt: skip
    (out / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in wls))
    return out


def _binding(p):
    (b,) = attention.match_attention(p, trace_ops(p))
    return b


def _sources(sol) -> dict[str, str]:
    return {s.path: s.content for s in sol.sources}


# ------------------------------------------------------------------------------------------------ planning


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_decode_problems_get_the_cuda_kernel_first(path):
    p = load_problem(path)
    b = _binding(p)
    assert b.consts["layout"] == "bhd" and b.consts["max_sq"] == 1 and b.consts["max_group"] in (4, 8)
    assert attention.cuda_decode_accepts(b)
    names = [x.solution.name for x in plan(p, "cuda:0")]
    # the tuned reference leads (a sure pass, T_b's ways), the graph of eager behind it, then the kernels
    assert names[:2] == [f"{p.name}__ref_tuned", f"{p.name}__ref_eager_cudagraph"]
    cuda = [n for n in names if "__attention_cuda_cpp_" in n]
    assert names[2 : 2 + len(cuda)] == cuda and len(cuda) == len(CUDA.variants())
    assert any("__attention_triton_" in n for n in names)
    first = OfflineAgent().propose(p, [], "cuda:0")
    assert first is not None and first.solution.name == names[0]
    assert cuda[0] == f"{p.name}__attention_cuda_cpp_threads128_waves2_clusterTrue"
    assert cuda[4:] == [f"{p.name}__attention_cuda_cpp_threads{t}_waves{w}" for t in (128, 256) for w in (1, 2)]
    # the CPU plan has no CUDA candidate
    assert not any("cuda_cpp" in x.solution.name for x in plan(p, "cpu"))


def test_prefill_and_unsupported_shapes_get_no_cuda_candidate(tmp_path):
    from tests.test_agents_offline_attention import write_case

    p = load_problem(write_case(tmp_path, "sdpa_plain"))  # Sq = Skv: prefill
    assert not attention.cuda_decode_accepts(_binding(p))
    assert not any("cuda_cpp" in x.solution.name for x in plan(p, "cuda:0"))
    wide = load_problem(write_decode(tmp_path, "g16", h=32, hk=2))  # 16 query heads per kv head
    assert _binding(wide).consts["max_group"] == 16 and not attention.cuda_decode_accepts(_binding(wide))
    d32 = load_problem(write_decode(tmp_path, "d32", d=32))
    assert not attention.cuda_decode_accepts(_binding(d32))
    fp32 = load_problem(write_decode(tmp_path, "fp32", dtype="float32"))
    assert not attention.cuda_decode_accepts(_binding(fp32))
    s2 = load_problem(write_decode(tmp_path, "s2", layout="bhsd", sq=2))
    assert all(not attention.cuda_decode_accepts(b) for b in attention.match_attention(s2, trace_ops(s2)))


def test_accepts_and_render_refuse_what_the_kernel_does_not_handle(tmp_path):
    p = load_problem(write_decode(tmp_path, "ok"))
    b = _binding(p)
    assert attention.cuda_decode_accepts(b)
    bad = [{"max_sq": 2}, {"causal": "top_left"}, {"head_dim": 96}, {"max_group": 9}, {"dtype": "float32"}]
    for change in bad:
        nb = Binding(b.roles, {**b.consts, **change})
        assert not attention.cuda_decode_accepts(nb), change
        with pytest.raises(ValueError):
            CUDA.sources(p, nb, CUDA.variants()[0])
    assert attention.cuda_decode_accepts(Binding(b.roles, {**b.consts, "causal": "bottom_right"}))


# ------------------------------------------------------------------------------------------------ sources


def test_rendered_sources_are_a_light_kernel_and_a_pybind_binding():
    from cuda_build import LIGHT_HEADERS, includes  # tests/

    p = load_problem(BUNDLED[0])
    b = _binding(p)
    for params in CUDA.variants():
        sol = build_solution(p, "attention", CUDA, b, params)
        assert sol.spec.entry_point == "kernel.cu::run" and sol.spec.languages[0].value == "cuda_cpp"
        files = _sources(sol)
        assert list(files) == ["kernel.cu", "binding.cpp"]
        kernel, binding = files["kernel.cu"], files["binding.cpp"]
        assert includes(kernel) <= LIGHT_HEADERS, includes(kernel) - LIGHT_HEADERS
        assert includes(binding) == {"torch/csrc/utils/pybind.h"}
        assert "PYBIND11_MODULE" not in kernel and "__global__" not in binding
        (decl,) = [line for line in binding.splitlines() if line.startswith("void run(")]
        assert decl == "void run(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache, at::Tensor out);"
        assert kernel.count(decl[:-1] + " {\n") == 1
        t, w, cl = params["threads"], params["waves"], "true" if params.get("cluster") else "false"
        assert f"decode_attention<scalar_t, 128, {t}, {w}, {cl}>(" in kernel
        assert "using scalar_t = __nv_bfloat16;" in kernel
        assert kernel.count("new_empty(") == 1 and "getCurrentCUDAStream()" in kernel
        assert "a.head_mul_k = G_; a.head_mul_g = 1;" in kernel  # repeat_interleave: head h uses kv head h // G
        scale = float(re.search(r"a\.qk_scale = ([0-9.e-]+)f;", kernel).group(1))
        assert scale == pytest.approx(128**-0.5 * 1.4426950408889634)
        for check in ("the head dim must be contiguous", "16-byte aligned", "shapes disagree", "at most 8x"):
            assert check in kernel


def test_tile_gqa_fp16_bshd_renders_its_strides(tmp_path):
    p = load_problem(write_decode(tmp_path, "bshd", layout="bshd", dtype="float16", gqa="tile", d=128, h=8, hk=2))
    b = _binding(p)
    assert (b.consts["layout"], b.consts["gqa"], b.consts["max_sq"]) == ("bshd", "tile", 1)
    kernel = _sources(build_solution(p, "attention", CUDA, b, CUDA.variants()[0]))["kernel.cu"]
    assert "using scalar_t = __half;" in kernel and "a.head_mul_k = 1; a.head_mul_g = HKV_;" in kernel
    assert "q.size(1) == 1" in kernel  # the query axis of [B, S, H, D]
    assert "a.sqb = q.stride(0); a.sqh = q.stride(2);" in kernel and "a.sks = k.stride(1);" in kernel


# ------------------------------------------------------------------------------------------------ nvcc


def _compile(sol, out: Path, extra: list[str]) -> tuple[dict, str]:
    from cuda_build import compile_objects

    sol = sol.model_copy(deep=True)
    sol.spec.compile_options.cuda_cflags.extend(extra)
    objs = compile_objects(sol, out)
    log = (objs["kernel.cu"].parent / "build.log").read_text(errors="replace")
    return objs, log


@pytest.mark.cuda_compile
@pytest.mark.parametrize("case", ["bundled_q32", "bundled_q32_cluster", "fp16_d64_tile_bhsd"])
def test_cuda_decode_compiles_for_sm90a_without_spills(case, tmp_path):
    """kernel.cu (nvcc, sm_90a) and binding.cpp build through the judge's compile-only path, their run symbols
    agree, and ptxas reports no spills for any kernel: one launch a call, the merge in it (with the cluster
    variant, its kernel and the arrival kernel it falls back to)."""
    if shutil.which("nvcc") is None or shutil.which("nm") is None:
        pytest.skip("nvcc or nm not on PATH")
    from cuda_build import run_symbols

    if case.startswith("bundled_q32"):
        p = load_problem(BUNDLED[0])
        params = CUDA.variants()[0 if case.endswith("cluster") else 4]
        assert bool(params.get("cluster")) == case.endswith("cluster")
    else:
        p = load_problem(write_decode(tmp_path / "p", "fp16", layout="bhsd", dtype="float16", gqa="tile", d=64))
        params = CUDA.variants()[-1]
    sol = build_solution(p, "attention", CUDA, _binding(p), params)
    objs, log = _compile(sol, tmp_path / "build", ["--resource-usage"])
    kernel, binding = run_symbols(objs["kernel.cu"]), run_symbols(objs["binding.cpp"])
    assert len(kernel["T"]) == 1 and not kernel["U"], kernel
    assert binding["U"] == kernel["T"], (binding, kernel)
    usage = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(usage) == (2 if params.get("cluster") else 1), log[-3000:]  # the merge in the same launch
    assert _sources(sol)["kernel.cu"].count("__global__") == 1  # a merge kernel's launch would add a host gap
    assert all(s == ("0", "0") for s in usage), log[-3000:]


# ------------------------------------------------------------------------------------------------ emulation
# Per-lane state is a tensor indexed by lane (32); a 32-bit register of two 16-bit values is a trailing pair.

LANE = torch.arange(32)
GR, T4 = LANE // 4, LANE % 4


def _mma(c: torch.Tensor, a: list[torch.Tensor], b: list[torch.Tensor]) -> torch.Tensor:
    """mma.m16n8k16.row.col, fp32 accumulate. a: 4 regs [32, 2], b: 2 regs [32, 2], c: [32, 4] (PTX layouts)."""
    A, B = torch.zeros(16, 16), torch.zeros(16, 8)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        A[g, 2 * t:2 * t + 2], A[g + 8, 2 * t:2 * t + 2] = a[0][lane], a[1][lane]
        A[g, 2 * t + 8:2 * t + 10], A[g + 8, 2 * t + 8:2 * t + 10] = a[2][lane], a[3][lane]
        B[2 * t:2 * t + 2, g], B[2 * t + 8:2 * t + 10, g] = b[0][lane], b[1][lane]
    C = A.double() @ B.double()
    out = c.clone()
    for lane in range(32):
        g, t = lane // 4, lane % 4
        out[lane] += torch.stack([C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t], C[g + 8, 2 * t + 1]]).float()
    return out


def _trans8x8(x: torch.Tensor) -> torch.Tensor:
    """movmatrix.m8n8.trans.b16: lane (r, t) holds row r, cols 2t, 2t+1 before and after."""
    M = torch.zeros(8, 8)
    for lane in range(32):
        M[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2] = x[lane]
    M = M.T
    return torch.stack([M[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2] for lane in range(32)])


def _perm(x: torch.Tensor, y: torch.Tensor, odd: bool) -> torch.Tensor:  # __byte_perm 0x7632 / 0x5410
    i = 1 if odd else 0
    return torch.stack([x[..., i], y[..., i]], -1)


def _xor(x: torch.Tensor, off: int) -> torch.Tensor:  # __shfl_xor_sync
    return x[LANE ^ off]


def _words(row: torch.Tensor) -> torch.Tensor:  # [32, n] 16-bit values -> [32, n/2, 2] registers
    return row.reshape(32, -1, 2)


def _plan(L: int, pairs: int, threads: int, waves: int, sms: int, ctas_per_sm: int) -> tuple[int, int]:
    """decode_attention's split heuristic (chunk, splits)."""
    tile, w = CUDA_DECODE_TILE, threads // 32
    target = waves * sms * ctas_per_sm
    splits = (target + pairs // 2) // pairs
    splits = max(1, min(splits, -(-L // (tile * w)), CUDA_DECODE_MAX_SPLITS))
    chunk = -(-(-(-L // splits)) // tile) * tile
    return chunk, -(-L // chunk)


def _emulate_cta(qh, kk, vv, begin, end, G, D, W, qk_scale, dt):
    """decode_attn_split for one CTA: qh [G, D] its query heads, kk/vv [L, D] its kv head; -> (m, l, acc) per head."""
    KC, NM = D // 32, D // 16
    rnd = (lambda x: x.to(dt).float())
    qpad = torch.zeros(8, D)
    qpad[:G] = qh
    qf = [_words(torch.stack([qpad[g, 32 * c + 8 * t:32 * c + 8 * t + 8] for g, t in zip(GR, T4)])) for c in range(KC)]
    s_o, s_m, s_l = torch.zeros(W, 8, D), torch.zeros(W, 8), torch.zeros(W, 8)
    for warp in range(W):

        def load_k(tile):
            kf = []
            for r in range(2):
                rows = []
                for g, t in zip(GR.tolist(), T4.tolist()):
                    key = tile + g + 8 * r
                    rows.append(kk[key, 8 * t:] if key < end else torch.zeros(D - 8 * t))
                kf.append([_words(torch.stack([x[32 * c:32 * c + 8] for x in rows])) for c in range(KC)])
            return kf

        def load_v(tile):
            vf = []
            for j in range(4):
                runs = []
                for rr in range(2):
                    lane_rows = []
                    for g, t in zip(GR.tolist(), T4.tolist()):
                        key = tile + 2 * t + (j & 1) + 8 * (j >> 1)
                        start = NM * g + rr * (D // 2)
                        lane_rows.append(vv[key, start:start + NM] if key < end else torch.zeros(NM))
                    runs.append(_words(torch.stack(lane_rows)))
                vf.append(runs)
            return vf

        o = torch.zeros(NM, 32, 4)
        m0, m1 = torch.full((32,), -1e30), torch.full((32,), -1e30)
        l0, l1 = torch.zeros(32), torch.zeros(32)
        tile = begin + 16 * warp
        if tile < end:
            kf, vf = load_k(tile), load_v(tile)
        while tile < end:
            nxt = tile + 16 * W
            s = torch.zeros(32, 4)
            for c in range(KC):
                for h in range(2):
                    a = [kf[0][c][:, 2 * h], kf[1][c][:, 2 * h], kf[0][c][:, 2 * h + 1], kf[1][c][:, 2 * h + 1]]
                    s = _mma(s, a, [qf[c][:, 2 * h], qf[c][:, 2 * h + 1]])
            if nxt < end:
                kf = load_k(nxt)
            ok0, ok1 = tile + GR < end, tile + GR + 8 < end
            ninf = torch.tensor(float("-inf"))
            s0, s1 = torch.where(ok0, s[:, 0] * qk_scale, ninf), torch.where(ok0, s[:, 1] * qk_scale, ninf)
            s2, s3 = torch.where(ok1, s[:, 2] * qk_scale, ninf), torch.where(ok1, s[:, 3] * qk_scale, ninf)
            x0, x1 = torch.maximum(s0, s2), torch.maximum(s1, s3)
            for off in (4, 8, 16):
                x0, x1 = torch.maximum(x0, _xor(x0, off)), torch.maximum(x1, _xor(x1, off))
            n0, n1 = torch.maximum(m0, x0), torch.maximum(m1, x1)
            al0, al1 = torch.exp2(m0 - n0), torch.exp2(m1 - n1)
            m0, m1 = n0, n1
            p0, p1, p2, p3 = torch.exp2(s0 - n0), torch.exp2(s1 - n1), torch.exp2(s2 - n0), torch.exp2(s3 - n1)
            l0, l1 = l0 * al0 + (p0 + p2), l1 * al1 + (p1 + p3)
            pb0 = _trans8x8(rnd(torch.stack([p0, p1], -1)))
            pb1 = _trans8x8(rnd(torch.stack([p2, p3], -1)))
            for i in range(NM):
                o[i] = o[i] * torch.stack([al0, al1, al0, al1], -1)
                odd, wd = bool(i & 1), i // 2
                a = [_perm(vf[0][0][:, wd], vf[1][0][:, wd], odd), _perm(vf[0][1][:, wd], vf[1][1][:, wd], odd),
                     _perm(vf[2][0][:, wd], vf[3][0][:, wd], odd), _perm(vf[2][1][:, wd], vf[3][1][:, wd], odd)]
                o[i] = _mma(o[i], a, [pb0, pb1])
            if nxt < end:
                vf = load_v(nxt)
            tile = nxt
        for off in (4, 8, 16):
            l0, l1 = l0 + _xor(l0, off), l1 + _xor(l1, off)
        for lane in range(4):  # gr == 0
            s_m[warp, 2 * lane], s_m[warp, 2 * lane + 1] = m0[lane], m1[lane]
            s_l[warp, 2 * lane], s_l[warp, 2 * lane + 1] = l0[lane], l1[lane]
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for r in range(2):
                for e in range(2):
                    start = r * (D // 2) + NM * g
                    s_o[warp, 2 * t + e, start:start + NM] = o[:, lane, 2 * r + e]
    mx = s_m.max(0).values.clamp_min(-1e30)
    e = torch.exp2(s_m - mx)
    return mx[:G], (e * s_l).sum(0)[:G], (e[:, :, None] * s_o).sum(0)[:G]


def emulate(q, k, v, consts, threads, waves, sms=132, ctas_per_sm=3, arrivals=None, seed=0):
    """One launch on [B, H, D] / [B, HKV, L, D]: every CTA, in a shuffled finishing order; with splits, each
    counts itself in on its pair's arrival counter and the one that counts last merges the pair's partials and
    zeroes the counter. ``arrivals`` (pair -> count, zero between launches) carries over from call to call."""
    B, H, D = q.shape
    HKV, L = k.shape[1], k.shape[2]
    G, W = H // HKV, threads // 32
    chunk, splits = _plan(L, B * HKV, threads, waves, sms, ctas_per_sm)
    qk_scale = consts["scale"] * 1.4426950408889634
    heads = (lambda hk: [hk * G + g for g in range(G)]) if consts["gqa"] == "interleave" else (
        lambda hk: [g * HKV + hk for g in range(G)])  # fmt: skip
    arrivals = arrivals if arrivals is not None else {}
    out = torch.full((B, H, D), float("nan"))
    ws: dict[tuple[int, int], tuple] = {}
    order = torch.randperm(B * HKV * splits, generator=torch.Generator().manual_seed(seed)).tolist()
    for cta in order:  # blockIdx.x = pair * splits + split
        split, pair = cta % splits, cta // splits
        b, hk = pair // HKV, pair % HKV
        hs = heads(hk)
        m, l, acc = _emulate_cta(q[b, hs].float(), k[b, hk].float(), v[b, hk].float(), split * chunk,
                                 min(L, split * chunk + chunk), G, D, W, qk_scale, q.dtype)
        if splits == 1:
            out[b, hs] = acc / l[:, None]
            continue
        ws[pair, split] = (m, l, acc)
        done = arrivals.get(pair, 0)
        arrivals[pair] = done + 1
        if done != splits - 1:
            continue
        parts = [ws[pair, s] for s in range(splits)]
        ms = torch.stack([p[0] for p in parts])
        mx = ms.max(0).values.clamp_min(-1e30)
        e = torch.exp2(ms - mx)
        l = (e * torch.stack([p[1] for p in parts])).sum(0)
        acc = (e[:, :, None] * torch.stack([p[2] for p in parts])).sum(0)
        out[b, hs] = acc / l[:, None]
        arrivals[pair] = 0
    return out.to(q.dtype), splits


@pytest.mark.parametrize(("h", "hk", "d", "gqa", "dtype", "L", "threads", "waves", "sms", "splits"), [
    (8, 2, 128, "interleave", torch.bfloat16, 50, 128, 1, 132, 1),  # one split: the CTA writes the output
    (8, 2, 128, "interleave", torch.bfloat16, 301, 128, 1, 8, 2),   # ragged tail in the last split
    (8, 2, 128, "interleave", torch.bfloat16, 1000, 128, 1, 132, 16),
    (4, 1, 64, "tile", torch.float16, 200, 256, 2, 4, 2),
    (6, 3, 64, "interleave", torch.bfloat16, 33, 128, 2, 132, 1),   # G = 2 (padded heads), a warp with no tile
    (3, 3, 128, "interleave", torch.float16, 129, 128, 1, 2, 1),    # G = 1, several tiles per warp
], ids=["direct_g4", "split_g4", "split16_g4", "tile_d64_g4", "g2_short", "mha"])  # fmt: skip
def test_emulated_kernel_matches_the_reference(h, hk, d, gqa, dtype, L, threads, waves, sms, splits):
    gen = torch.Generator().manual_seed(0)
    B = 2
    q = torch.randn(B, h, d, generator=gen).to(dtype)
    k = torch.randn(B, hk, L, d, generator=gen).to(dtype)
    v = torch.randn(B, hk, L, d, generator=gen).to(dtype)
    consts = {"layout": "bhd", "causal": False, "scale": d**-0.5, "gqa": gqa, "head_dim": d}
    arrivals: dict[int, int] = {}
    want = semantics(q, k, v, consts)
    for call in range(2):  # the counters one launch leaves are the next launch's start
        got, used = emulate(q, k, v, consts, threads, waves, sms=sms, ctas_per_sm=1, arrivals=arrivals, seed=call)
        assert used == splits
        assert not any(arrivals.values()), arrivals
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
    wrong = semantics(q, k, v, {**consts, "gqa": "tile" if gqa == "interleave" else "interleave"})
    if h // hk > 1 and hk > 1:
        assert not torch.allclose(got.float(), wrong.float(), atol=2e-2, rtol=2e-2)  # the check can fail


def test_split_heuristic_on_the_bundled_workloads():
    """Chunks are whole 16-key tiles, cover L exactly once, and the grid is about waves x resident CTAs."""
    for B, L in [(1, 512), (7, 4097), (16, 2048), (32, 8192), (64, 1024), (1, 16384)]:
        for threads in (128, 256):
            chunk, splits = _plan(L, B * 8, threads, 1, 132, 3 if threads == 128 else 1)
            assert chunk % CUDA_DECODE_TILE == 0 and (splits - 1) * chunk < L <= splits * chunk
            assert 1 <= splits <= CUDA_DECODE_MAX_SPLITS
            assert chunk >= min(L, CUDA_DECODE_TILE * threads // 32)
    assert _plan(512, 8, 128, 1, 132, 3) == (64, 8)  # B = 1, L = 512: one tile per warp, 64 CTAs
    assert _plan(8192, 256, 128, 1, 132, 3) == (4096, 2)
