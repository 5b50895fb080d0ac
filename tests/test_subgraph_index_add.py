"""The index_add family (``agents/offline/subgraph/families/index_add``): row scatters found in references (a MoE
combine, the scatter ending a grouped expert loop) in each spelling, decoys left alone, the rewritten graph equal
to the reference on the CPU, and the kernel equal to the op under Triton's interpreter and compiled for sm_90."""

from __future__ import annotations

import types

import pytest
import torch

from agents.offline.subgraph.loops import captured
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted

_REFERENCES = {
    "combine_index_add": """
def run(rows, index, weights):
    out = torch.zeros(20, rows.shape[1], dtype=torch.float32)
    out.index_add_(0, index, rows.float() * weights[:, None])
    return out.to(rows.dtype)
""",
    "scatter_add_spread_index": """
def run(rows, index, weights):
    src = weights.unsqueeze(1) * rows.float()
    out = torch.zeros(20, rows.shape[1], dtype=torch.float32)
    return out.scatter_add(0, index[:, None].expand(-1, rows.shape[1]), src).to(rows.dtype)
""",
    "index_put_accumulate_no_scale": """
def run(rows, index, weights):
    out = rows.new_zeros(20, rows.shape[1])
    return out.index_put((index,), rows, accumulate=True)
""",
    "into_a_given_base": """
def run(rows, index, weights, base):
    return torch.index_add(base.float(), 0, index, rows.float() * weights[:, None])
""",
}
_DECOYS = {
    "per_column_index": """
def run(rows, index, weights):
    cols = torch.remainder(index[:, None] + torch.arange(rows.shape[1]), 20)
    return torch.zeros(20, rows.shape[1], dtype=rows.dtype).scatter_add(0, cols, rows)
""",
    "index_narrower_than_the_rows": """
def run(rows, index, weights):
    spread = index[:, None].expand(-1, rows.shape[1] // 2)
    return torch.zeros(20, rows.shape[1], dtype=rows.dtype).scatter_add(0, spread, rows)
""",
    "along_columns": """
def run(rows, index, weights):
    return torch.zeros(rows.shape[0], 20, dtype=rows.dtype).index_add(1, index[: rows.shape[1]] % 20, rows)
""",
    "in_place_on_a_tensor_read_again": """
def run(rows, index, weights, base):
    before = base * 2
    base.index_add_(0, index, rows)
    return base + before
""",
}


def _fn(source: str):
    module = types.ModuleType("ref")
    exec("import torch\n" + source, module.__dict__)
    return module.run


def _args(source: str, dtype: torch.dtype = torch.bfloat16, n: int = 48, h: int = 24):
    gen = torch.Generator().manual_seed(7)
    rows = torch.randn(n, h, generator=gen).to(dtype)
    index = torch.randint(0, 20, (n,), generator=gen)
    weights = torch.rand(n, generator=gen)
    args = [rows, index, weights]
    if "base" in source.split("\n")[1]:
        args.append(torch.randn(20, h, generator=gen).to(dtype if "base * 2" in source else torch.float32))
    return tuple(args)


@pytest.mark.parametrize("name", sorted(_REFERENCES))
def test_each_spelling_is_replaced_and_the_graph_still_computes_the_reference(name):
    fn, args = _fn(_REFERENCES[name]), _args(_REFERENCES[name])
    gm, done = rewrite(captured(fn, args))
    assert [r.family for r in done] == ["index_add"], done
    assert ("None" in done[0].description) == (name != "into_a_given_base")  # zeros built inside: no base read
    assert ("unsqueeze" in done[0].description) == (name != "index_put_accumulate_no_scale")  # the scale is the op's
    want, got = fn(*[a.clone() for a in args]), gm(*args)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert got.dtype == want.dtype
    if name == "index_put_accumulate_no_scale":  # sums in bf16: index_put and index_add may round differently
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    else:  # sums in fp32 by the same op: the same bits
        assert torch.equal(got, want)
    assert not any("index_add" in str(n.target) or "scatter" in str(n.target) or "index_put" in str(n.target)
                   for n in gm.graph.nodes if n.op == "call_function" and "sf_subgraph" not in str(n.target))


def test_a_scatter_into_one_row_is_checked_with_indices_that_fit_and_replaced():
    """A MoE combine at one token: the region check draws its indices below the rows they index (an index_add
    into one row refuses any other), so the smallest workload, where the agent looks, finds the family too."""
    fn = _fn(_REFERENCES["combine_index_add"].replace("torch.zeros(20,", "torch.zeros(1,"))
    rows, _, weights = _args(_REFERENCES["combine_index_add"], n=6)
    args = (rows, torch.zeros(6, dtype=torch.int64), weights)
    gm, done = rewrite(captured(fn, args))
    assert [r.family for r in done] == ["index_add"] and "rows=1" in done[0].description
    assert torch.equal(gm(*args)[0] if isinstance(gm(*args), (tuple, list)) else gm(*args), fn(*args))


@pytest.mark.parametrize("name", sorted(_DECOYS))
def test_decoys_are_left_alone(name):
    fn, args = _fn(_DECOYS[name]), _args(_DECOYS[name], torch.float32)
    gm, done = rewrite(captured(fn, [a.clone() for a in args]))
    assert not [r for r in done if r.family == "index_add"], done
    got = gm(*[a.clone() for a in args])
    torch.testing.assert_close(got[0] if isinstance(got, (tuple, list)) else got, fn(*[a.clone() for a in args]))


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.index_add.kernel import index_add_rows
from agents.offline.subgraph.families.index_add.op import _index_add_rows

gen = torch.Generator().manual_seed(3)
out = {}
cases = {  # name: (rows, sources, columns, source dtype, accumulation dtype, output dtype, scale, base, block)
    "combine_fp32_to_bf16": (9, 40, 70, torch.bfloat16, torch.float32, torch.bfloat16, True, False, 32),
    "half_product_rounded": (6, 30, 33, torch.float16, torch.float16, torch.float16, True, False, 64),
    "into_base_no_scale": (5, 17, 16, torch.float32, torch.float32, torch.float32, False, True, 16),
    "rows_with_no_source": (40, 3, 8, torch.float32, torch.float32, torch.float32, True, True, 8),
}
for name, (t, n, h, sd, ad, od, has_scale, has_base, block) in cases.items():
    src = torch.randn(n, h, generator=gen).to(sd)
    index = torch.randint(0, t, (n,), generator=gen)
    scale = torch.rand(n, 1, generator=gen) if has_scale else None
    base = torch.randn(t, h, generator=gen).to(ad) if has_base else None
    want = _index_add_rows(base, index, src, scale, t, ad, od)
    rel, same = 0.0, True
    for ahead in (1, 3, 8):  # sources loaded ahead: one, a count dividing no run, more than most runs hold
        got = index_add_rows(base, index, src, scale, t, ad, od, block, 4, None, ahead)
        rel = max(rel, ((got.float() - want.float()).abs() / want.float().abs().clamp_min(1e-3)).max().item())
        same = same and str(got.dtype) == str(want.dtype)
    out[name] = [rel, same]
src = torch.randn(6, 8, generator=gen)
index = torch.tensor([0, 1, 7, -1, 2, 1])  # 7 and -1 lie outside the 3 rows: not added
got = index_add_rows(None, index, src, None, 3, torch.float32, torch.float32, 8, 4)
keep = (index >= 0) & (index < 3)
want = torch.zeros(3, 8).index_add(0, index[keep], src[keep])
out["outside_dropped"] = [(got - want).abs().max().item(), True]
print("RESULT" + json.dumps(out))
"""


@pytest.mark.slow
def test_the_kernel_matches_the_op_in_the_interpreter():
    pytest.importorskip("triton")
    got = run_interpreted(_INTERPRET_SCRIPT, [], timeout_s=300)
    assert set(got) == {"combine_fp32_to_bf16", "half_product_rounded", "into_base_no_scale", "rows_with_no_source",
                        "outside_dropped"}  # fmt: skip
    # fp32 sums in the sources' order are the op's bit for bit; rounded to bf16 they differ by at most one unit in
    # the last place (the interpreter's conversion truncates where the GPU's rounds to nearest); fp16 sums (the op
    # rounds after each add, the kernel once) by a rounding or two
    bound = {"combine_fp32_to_bf16": 2**-7, "half_product_rounded": 2**-8}
    for name, (rel, same_dtype) in got.items():
        assert same_dtype and rel <= bound.get(name, 0.0), (name, rel)


@pytest.mark.parametrize("acc,has_scale,has_base,ahead", [("fp32", True, False, 4), ("bf16", True, True, 8),
                                                         ("fp16", False, True, 4)])  # fmt: skip
def test_the_kernel_compiles_for_sm90(acc, has_scale, has_base, ahead):
    pytest.importorskip("triton")
    import triton.language as tl

    from agents.offline.subgraph.families.index_add import kernel

    types_ = {"src_ptr": "*bf16", "scale_ptr": "*fp32", "order_ptr": "*i64", "starts_ptr": "*i64",
              "base_ptr": f"*{acc}", "y_ptr": "*bf16"}  # fmt: skip
    consts = dict(HAS_SCALE=has_scale, HAS_BASE=has_base, ACC=getattr(tl, {"fp32": "float32", "bf16": "bfloat16",
                                                                           "fp16": "float16"}[acc]), BLOCK=1024,
                  AHEAD=ahead)  # fmt: skip
    assert compile_sm90(kernel._index_add_rows, types_, consts).asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("t,k,h", [(1, 6, 4096), (4096, 6, 4096), (16384, 8, 2048)])
def test_the_op_on_a_gpu_agrees_with_torch(t, k, h):
    from agents.offline.subgraph.families.index_add.kernel import index_add_rows
    from agents.offline.subgraph.families.index_add.op import INDEX_ADD_ROWS, _index_add_rows

    n = t * k
    src = torch.randn(n, h, device="cuda").to(torch.bfloat16)
    index = torch.randint(0, t, (n,), device="cuda")
    scale = torch.rand(n, 1, device="cuda")
    want = _index_add_rows(None, index, src, scale, t, torch.float32, torch.bfloat16)
    for got in (index_add_rows(None, index, src, scale, t, torch.float32, torch.bfloat16),
                INDEX_ADD_ROWS(None, index, src, scale, t, torch.float32, torch.bfloat16)):
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
