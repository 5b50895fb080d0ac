"""The RMSNorm backward family (``agents/offline/subgraph/families/rmsnorm_bwd``): backward passes found by what
they compute in each spelling (with and without the weight's gradient, an offset weight, no weight, inside a larger
graph), forward norms and LayerNorm's backward left alone, the rewritten graph equal to the reference on the CPU,
and the kernel equal to the op under Triton's interpreter and compiled for sm_90."""

from __future__ import annotations

import types

import pytest
import torch

from agents.offline.subgraph.loops import captured
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import compile_sm90, run_interpreted

_HEAD = """
import torch


def stats(x, eps=1e-6):
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    return xf, rstd
"""
_REFERENCES = {  # name: (source, the op expected)
    "dx_and_dw": ("""
def run(x, w, g, z):
    xf, rstd = stats(x)
    xhat = xf * rstd
    gw = g.float() * w.float()
    dx = rstd * (gw - xhat * (gw * xhat).mean(dim=-1, keepdim=True))
    return dx.to(x.dtype), (g.float() * xhat).reshape(-1, x.shape[-1]).sum(dim=0).to(w.dtype)
""", "rmsnorm_bwd"),
    "rstd_cubed_and_offset_weight": ("""
def run(x, w, g, z):
    xf, rstd = stats(x)
    gw = g.float() * (1.0 + w.float())
    dx = gw * rstd - xf * rstd.pow(3) * (gw * xf).mean(-1, keepdim=True)
    dw = (g.float() * xf * rstd).sum(dim=(0, 1))
    return dx.to(x.dtype), dw.to(w.dtype)
""", "rmsnorm_bwd"),
    "no_weight": ("""
def run(x, w, g, z):
    xf, rstd = stats(x)
    xhat = xf * rstd
    return (rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))).to(x.dtype)
""", "rmsnorm_bwd_dx"),
    "frozen_weight_then_residual_gradient": ("""
def run(x, w, g, z):
    xf, rstd = stats(x)
    xhat = xf * rstd
    gw = g * w
    dx = rstd * (gw - xhat * (gw * xhat).mean(dim=-1, keepdim=True))
    return dx + z
""", "rmsnorm_bwd_dx"),
}
_DECOYS = {
    "forward_norm": """
def run(x, w, g, z):
    xf, rstd = stats(x)
    return (xf * rstd).to(x.dtype) * w
""",
    "forward_norm_times_a_gate": """
def run(x, w, g, z):
    xf, rstd = stats(x)
    return (xf * rstd * w) * torch.sigmoid(z)
""",
    "layernorm_backward": """
def run(x, w, g, z):
    xc = x - x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + 1e-6)
    xhat = xc * rstd
    gw = g * w
    dx = rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
    return dx, (g * xhat).sum(dim=(0, 1))
""",
}


def _fn(body: str):
    module = types.ModuleType("ref")
    exec(_HEAD + body, module.__dict__)
    return module.run


def _args(dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(11)
    x, g, z = (torch.randn(2, 5, 48, generator=gen).to(dtype) for _ in range(3))
    return x, (torch.rand(48, generator=gen) + 0.5).to(dtype), g, z


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("name", sorted(_REFERENCES))
def test_each_spelling_is_replaced_and_the_graph_still_computes_the_reference(name):
    body, op = _REFERENCES[name]
    fn, args = _fn(body), _args()
    gm, done = rewrite(captured(fn, args))
    assert [r.description.split("(")[0] for r in done if r.family == "rmsnorm_bwd"] == [op], done
    for got, want in zip(_flat(gm(*args)), _flat(fn(*args)), strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    if name == "rstd_cubed_and_offset_weight":
        assert "offset=1.0" in done[0].description


def test_a_backward_that_autograd_derives_is_found_by_what_it_computes():
    """A reference that differentiates its forward with ``torch.autograd.grad``: the traced backward is autograd's
    own formula (``rstd ** 3``, a ``-0.5`` and a ``2 x`` from the derivative of the square), found and replaced."""
    fn = _fn("""
def run(x, w, g, z):
    with torch.enable_grad():
        xr, wr = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
        xf = xr.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * wr
        return torch.autograd.grad(y, (xr, wr), g)
""")
    args = _args()
    gm, done = rewrite(captured(fn, args))
    assert [r.description.split("(")[0] for r in done] == ["rmsnorm_bwd"], done
    for got, want in zip(_flat(gm(*args)), _flat(fn(*args)), strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_half_precision_inputs_give_the_references_rounding():
    body, _ = _REFERENCES["dx_and_dw"]
    fn, args = _fn(body), _args(torch.bfloat16)
    gm, done = rewrite(captured(fn, args))
    assert [r.family for r in done] == ["rmsnorm_bwd"]
    for got, want in zip(_flat(gm(*args)), _flat(fn(*args)), strict=True):
        assert got.dtype == want.dtype == torch.bfloat16
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", sorted(_DECOYS))
def test_forward_norms_and_layernorms_backward_are_not_read_as_one(name):
    fn, args = _fn(_DECOYS[name]), _args()
    gm, done = rewrite(captured(fn, args))
    assert not [r for r in done if r.family == "rmsnorm_bwd"], done
    for got, want in zip(_flat(gm(*args)), _flat(fn(*args)), strict=True):
        torch.testing.assert_close(got, want)


_INTERPRET_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.rmsnorm_bwd.kernel import rmsnorm_bwd
from agents.offline.subgraph.families.rmsnorm_bwd.op import backward

gen = torch.Generator().manual_seed(5)
out = {}
cases = {  # name: (rows, columns, dtype, weight, offset, dw, programs)
    "dx_dw_offset": (7, 40, torch.float32, True, 1.0, True, 3),
    "no_weight_dx_only": (5, 64, torch.float32, False, 0.0, False, 2),
    "half_inputs": (9, 33, torch.float16, True, 0.0, True, 4),
    "runs_longer_than_a_step": (50, 96, torch.float32, True, 0.0, True, 2),  # 25 rows each: steps of 16 and 9
}
for name, (rows, cols, dtype, has_w, offset, has_dw, programs) in cases.items():
    x, g = torch.randn(rows, cols, generator=gen).to(dtype), torch.randn(rows, cols, generator=gen).to(dtype)
    w = torch.randn(cols, generator=gen).to(dtype) if has_w else None
    got = rmsnorm_bwd(x, w, g, 1e-6, offset, torch.float32, torch.float32 if has_dw else None, programs)
    got = got if isinstance(got, tuple) else (got,)
    want = backward(x, w, g, 1e-6, offset)[: len(got)]
    out[name] = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(got, want))
print("RESULT" + json.dumps(out))
"""


@pytest.mark.slow
def test_the_kernel_matches_the_op_in_the_interpreter():
    pytest.importorskip("triton")
    got = run_interpreted(_INTERPRET_SCRIPT, [], timeout_s=300)
    assert set(got) == {"dx_dw_offset", "no_weight_dx_only", "half_inputs", "runs_longer_than_a_step"}
    assert max(got.values()) < 1e-5, got  # float32 sums in another order


@pytest.mark.parametrize("block,has_w,has_dw", [(64, True, True), (1024, True, True), (8192, True, False),
                                                (16384, False, False)])
def test_the_kernel_compiles_for_sm90(block, has_w, has_dw):
    pytest.importorskip("triton")
    from agents.offline.subgraph.families.rmsnorm_bwd import kernel

    types_ = {"x_ptr": "*bf16", "w_ptr": "*bf16", "g_ptr": "*bf16", "dx_ptr": "*bf16", "part_ptr": "*fp32",
              "eps": "fp32", "offset": "fp32"}  # fmt: skip
    consts = dict(HAS_W=has_w, HAS_DW=has_dw, BLOCK=block, ROWS=kernel.rows_at_once(block))
    assert compile_sm90(kernel._rmsnorm_bwd_rows, types_, consts).asm["cubin"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("t,h,dtype", [(1, 6144, torch.float32), (570, 896, torch.bfloat16),
                                       (16384, 6144, torch.float32)])
def test_the_op_on_a_gpu_agrees_with_torch(t, h, dtype):
    from agents.offline.subgraph.families.rmsnorm_bwd.op import RMSNORM_BWD, _rmsnorm_bwd

    x, g = torch.randn(t, h, device="cuda").to(dtype), torch.randn(t, h, device="cuda").to(dtype)
    w = torch.rand(h, device="cuda").to(dtype)
    want = _rmsnorm_bwd(x, w, g, 1e-6, 0.0, dtype, dtype)
    got = RMSNORM_BWD(x, w, g, 1e-6, 0.0, dtype, dtype)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for a, b in zip(got, want):
        torch.testing.assert_close(a.float(), b.float(), atol=tol * max(1.0, b.abs().max().item()), rtol=tol)
