"""Family ops storing straight into the judge's output buffers (``agents/offline/subgraph/into.py`` and the ops'
``_into`` twins in ``ops.py``): which outputs are handed over, that the graph so rewritten computes what the plain
rewritten graph does bit for bit, that Inductor then adds no copy after the op, and that the kernels' launchers
store into given buffers exactly what they return otherwise (Triton's interpreter; a GPU where there is one)."""

from __future__ import annotations

import operator

import pytest
import torch

from agents.offline.subgraph.into import Destination, write_into
from agents.offline.subgraph.loops import captured
from agents.offline.subgraph.ops import NAMESPACE, into_of
from agents.offline.subgraph.rewrite import rewrite
from tests.triton_interp import run_interpreted

CPU = torch.device("cpu")


def _add_rms(x, r, w):
    h = x + r
    hf = h.float()
    y = (hf * torch.rsqrt((hf * hf).mean(dim=-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    return y, h


def _inputs(rows=5, cols=64, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(rows, cols, generator=g).to(dtype), torch.randn(rows, cols, generator=g).to(dtype),
            torch.randn(cols, generator=g).to(dtype)]  # fmt: skip


def _rewritten(fn, args):
    gm, done = rewrite(captured(fn, args), "cpu")
    assert done, "the family was not found: nothing to hand over"
    return gm


def _run(written, args, outs):
    """The destination-passing call as the runtime makes it: direct outputs stored by the ops, the rest copied."""
    rest = [o for i, o in enumerate(outs) if i not in written.direct]
    for dst, src in zip(rest, written.gm(*args, *outs), strict=True):
        dst.copy_(src)


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def test_the_ops_whose_kernels_store_into_buffers_have_twins_and_only_they_do():
    import agents.offline.subgraph.families  # noqa: F401  (registers every family's ops)
    import agents.offline.subgraph.stand_ins  # noqa: F401

    ns = getattr(torch.ops, NAMESPACE)
    ops = [n for n in dir(ns) if not n.startswith("_") and not n.endswith("_into") and hasattr(getattr(ns, n), "default")]
    with_twin = {n for n in ops if into_of(getattr(ns, n).default) is not None}
    assert with_twin == {"rmsnorm", "add_rmsnorm", "gated", "rope", "rope_complex", "rmsnorm_bwd", "rmsnorm_bwd_dx",
                         "index_add_rows"}  # fmt: skip
    for name in with_twin:
        twin = into_of(getattr(ns, name).default)
        assert twin._schema.name == f"{NAMESPACE}::{name}_into"
        assert twin._schema.arguments[-1].alias_info.is_write  # the buffers are declared written
        assert into_of(twin) is None  # a twin has no twin
    assert into_of(torch.ops.aten.add.Tensor) is None and into_of(operator.getitem) is None


def test_both_outputs_of_add_rmsnorm_are_stored_by_the_op_and_equal_the_plain_graph():
    args = _inputs()
    gm = _rewritten(_add_rms, args)
    want = [t.clone() for t in gm(*args)]
    outs = [torch.full_like(t, float("nan")) for t in want]
    written = write_into(gm, [Destination.of(o) for o in outs], CPU)
    assert written.direct == (0, 1)
    _run(written, args, outs)
    assert all(torch.equal(o, w) for o, w in zip(outs, want))
    ops = [n.target for n in written.gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.sf_subgraph.add_rmsnorm_into.default in ops and torch.ops.sf_subgraph.add_rmsnorm.default not in ops
    assert [torch.equal(a, b) for a, b in zip(gm(*args), want)] == [True, True]  # the graph given is left as it was


def test_a_reshaped_result_is_stored_through_a_view_of_the_buffer():
    def fn(x, r, w):
        y, h = _add_rms(x, r, w)
        return y.reshape(-1), h.unsqueeze(0)

    args = _inputs()
    gm = _rewritten(fn, args)
    want = [t.clone() for t in gm(*args)]
    outs = [torch.empty_like(t) for t in want]
    written = write_into(gm, [Destination.of(o) for o in outs], CPU)
    assert written.direct == (0, 1)
    _run(written, args, outs)
    assert all(torch.equal(o, w) for o, w in zip(outs, want))


def test_a_buffer_that_does_not_fit_is_copied_into_as_before():
    args = _inputs()
    gm = _rewritten(_add_rms, args)
    want = [t.clone() for t in gm(*args)]
    wide = torch.empty(want[0].shape[1], want[0].shape[0], dtype=want[0].dtype).t()  # right shape, not contiguous
    cases = {
        "not contiguous": ([wide, torch.empty_like(want[1])], (1,)),
        "another dtype": ([torch.empty(want[0].shape), torch.empty_like(want[1])], (1,)),
    }
    for why, (outs, direct) in cases.items():
        written = write_into(gm, [Destination.of(o) for o in outs], CPU)
        assert written.direct == direct, why
        _run(written, args, outs)
        assert all(torch.equal(o.to(w.dtype), w) for o, w in zip(outs, want)), why
    assert write_into(gm, [Destination.of(want[0])], CPU).count == 0  # one buffer for two outputs: nothing done


def test_a_result_returned_twice_is_stored_once_and_copied_once():
    def fn(x, r, w):
        y, h = _add_rms(x, r, w)
        return y, y

    args = _inputs()
    gm = _rewritten(fn, args)
    want = gm(*args)
    outs = [torch.empty_like(t) for t in want]
    written = write_into(gm, [Destination.of(o) for o in outs], CPU)
    assert written.direct == (0,)  # h has no output: the op stores it in a buffer of its own
    _run(written, args, outs)
    assert torch.equal(outs[0], want[0]) and torch.equal(outs[1], want[0])


def test_an_op_whose_result_is_written_in_place_later_keeps_its_own_buffers():
    args = _inputs()
    gm = _rewritten(_add_rms, args)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    y = out.args[0][0]
    with gm.graph.inserting_before(out):
        gm.graph.call_function(torch.ops.aten.mul_.Tensor, (y, 2.0))
    gm.recompile()
    outs = [torch.empty_like(t) for t in gm(*args)]
    assert write_into(gm, [Destination.of(o) for o in outs], CPU).count == 0


@pytest.mark.slow
def test_inductor_adds_no_copy_after_an_op_that_stores_every_output():
    from torch._inductor.utils import run_and_get_code

    from agents.offline.subgraph.runtime import _storing

    args = _inputs(dtype=torch.float32)
    gm = _rewritten(_add_rms, args)
    want = [t.clone() for t in gm(*args)]
    outs = [torch.empty_like(t) for t in want]
    written = write_into(gm, [Destination.of(o) for o in outs], CPU)
    _, code = run_and_get_code(torch.compile(_storing(written, 2), dynamic=False), *args, *outs)
    text = "\n".join(code)
    assert "sf_subgraph.add_rmsnorm_into" in text
    assert "copy_" not in text, text[-2000:]
    assert all(torch.equal(o, w) for o, w in zip(outs, want))


_LAUNCHERS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from agents.offline.subgraph.families.rmsnorm.kernel import rmsnorm
from agents.offline.subgraph.families.gated.kernel import gated
from agents.offline.subgraph.families.rope.kernel import rope
from agents.offline.subgraph.families.rmsnorm_bwd.kernel import rmsnorm_bwd
from agents.offline.subgraph.families.index_add.kernel import index_add_rows

g = torch.Generator().manual_seed(1)
bf, h = torch.bfloat16, torch.float16  # (the interpreter's bfloat16 RMSNorm overflows: NaN either way)
x, r = torch.randn(6, 40, generator=g).to(bf), torch.randn(6, 40, generator=g).to(bf)
w = torch.randn(40, generator=g).to(bf)
q = torch.randn(3, 2, 4, 16, generator=g)
cos, sin = torch.randn(3, 1, 4, 8, generator=g), torch.randn(3, 1, 4, 8, generator=g)
src, idx = torch.randn(9, 40, generator=g), torch.randint(0, 4, (9,), generator=g)
calls = {
    "add_rmsnorm": lambda out: rmsnorm(x.to(h), r.to(h), w.to(h), 1e-6, 0.0, True, h, out=out),
    "gated": lambda out: gated(x, r, "silu", None, torch.float32, out=out),
    "rope": lambda out: rope(q, cos, sin, 16, False, True, torch.float32, out=out),
    "rmsnorm_bwd": lambda out: rmsnorm_bwd(x.float(), w.float(), r.float(), 1e-6, 0.0, torch.float32, torch.float32,
                                           2, out),
    "rmsnorm_bwd_bf16_dw": lambda out: rmsnorm_bwd(x, w, r, 1e-6, 0.0, bf, bf, 2, out),
    "index_add": lambda out: index_add_rows(None, idx, src, None, 4, torch.float32, torch.float32, 64, 4, out),
}
res = {}
for name in json.loads(sys.argv[2]):
    plain = calls[name](None)
    plain = list(plain) if isinstance(plain, tuple) else [plain]
    bufs = tuple(torch.full_like(p, float("nan")) for p in plain if p is not None)
    got = calls[name](bufs)
    got = list(got) if isinstance(got, tuple) else [got]
    res[name] = [all(torch.equal(a, b) for a, b in zip(bufs, [p for p in plain if p is not None])),
                 all(a is b for a, b in zip(got, bufs))]
print("RESULT", json.dumps(res))
"""


@pytest.mark.slow
def test_the_launchers_store_into_given_buffers_what_they_return_otherwise_in_the_interpreter():
    pytest.importorskip("triton")
    names = ["add_rmsnorm", "gated", "rope", "rmsnorm_bwd", "rmsnorm_bwd_bf16_dw", "index_add"]
    got = run_interpreted(_LAUNCHERS_SCRIPT, names, timeout_s=300)
    assert got == {n: [True, True] for n in names}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_each_twin_stores_what_its_op_returns():
    import agents.offline.subgraph.families  # noqa: F401

    ops = torch.ops.sf_subgraph
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(300, 1024, device="cuda", generator=g).bfloat16()
    r = torch.randn(300, 1024, device="cuda", generator=g).bfloat16()
    w = torch.randn(1024, device="cuda", generator=g).bfloat16()
    idx = torch.randint(0, 64, (300,), device="cuda", generator=g)
    calls = {
        "add_rmsnorm": ((x, r, w, 1e-6, 0.0, True, torch.bfloat16), 2),
        "gated": ((x, r, "silu", None, torch.bfloat16), 1),
        "rmsnorm_bwd": ((x.float(), w.float(), r.float(), 1e-6, 0.0, torch.float32, torch.float32), 2),
        "index_add_rows": ((None, idx, x, None, 64, torch.float32, torch.bfloat16), 1),
    }
    for name, (args, n) in calls.items():
        want = _as_list(getattr(ops, name)(*args))
        bufs = [torch.full_like(t, float("nan")) for t in want]
        getattr(ops, f"{name}_into")(*args, bufs)
        torch.cuda.synchronize()
        for b, t in zip(bufs, want):
            torch.testing.assert_close(b, t, rtol=1e-5, atol=1e-5, msg=name)
        assert len(bufs) == n
