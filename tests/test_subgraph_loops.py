"""Expert loops (``agents/offline/subgraph/loops.py``): a MoE layer written as a loop over experts with
``nonzero`` does not trace with fake tensors; traced with real inputs, its unrolled iterations become one grouped
body (rows sorted by expert, grouped GEMMs over sync-free counts, one index_add) that computes what the loop does
on inputs it was not traced on, and the families are then found inside it. Loops whose iterations differ, or
whose body mixes rows, are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agents.offline.subgraph.capture import NotCapturable, capture
from agents.offline.subgraph.loops import grouped, grouped_loops
from agents.offline.subgraph.region import target_name


def _expert_loop(dtype: str = "float32", act: str = "silu", renormalize: bool = True, experts: int = 6):
    """The generator's expert-loop MoE layer at a small size: its ``run`` and an inputs maker for ``tokens``."""
    from solforge.problems.ops.common import token_rows
    from solforge.problems.ops.composed import moe_expert_loop

    draft = moe_expert_loop(hidden=32, intermediate=24, experts=experts, top_k=2, renormalize=renormalize, act=act,
                            dtype=dtype, rows=token_rows((9,)))  # fmt: skip
    scope: dict = {}
    exec(compile(draft.reference, "reference.py", "exec"), scope)  # noqa: S102 - the generator's own source

    def inputs(tokens: int, seed: int) -> tuple:
        torch.manual_seed(seed)
        args = scope["make_inputs"]({"T": tokens, "H": 32, "I": 24, "E": experts}, "cpu")
        return tuple(args[n] for n in draft.inputs)

    return scope["run"], inputs


@pytest.mark.parametrize("dtype,act", [("float32", "silu"), ("bfloat16", "tanh"), ("float16", "silu")])
def test_an_expert_loop_becomes_one_grouped_body_that_computes_the_loop(dtype, act):
    run, inputs = _expert_loop(dtype, act)
    with pytest.raises(NotCapturable):  # nonzero: no fake-tensor graph
        capture(run, inputs(5, 0))
    gm = grouped(run, inputs(5, 0), check=[inputs(5, 1)])
    ops = [target_name(n) for n in gm.graph.nodes]
    assert "nonzero" not in ops and ops.count("grouped_mm") == 2 and ops.count("histogram") == 1
    assert ops.count("index_add") == 1 and grouped_loops(gm) == [("expert_loop", grouped_loops(gm)[0][1])]
    for seed in (2, 3):  # experts the trace never saw get tokens here
        args = inputs(5, seed)
        torch.testing.assert_close(gm(*args), run(*args), rtol=1e-2 if dtype != "float32" else 1e-5, atol=1e-2)


def test_a_loop_whose_iterations_differ_is_refused():
    def run(x, ids, w):
        out = torch.zeros_like(x)
        for e in range(3):
            token, slot = torch.nonzero(ids == e, as_tuple=True)
            y = x[token] @ w[e].t()
            out.index_add_(0, token, y * 2 if e == 1 else y)
        return out

    x, w = torch.randn(8, 4), torch.randn(3, 4, 4)
    ids = torch.tensor([[0, 1], [1, 2], [2, 0], [0, 1], [1, 2], [2, 0], [0, 2], [1, 0]])
    with pytest.raises(NotCapturable, match="differ"):
        grouped(run, (x, ids, w))


def test_a_body_that_mixes_rows_is_refused():
    def run(x, ids, w):
        out = torch.zeros_like(x)
        for e in range(2):
            token, _ = torch.nonzero(ids == e, as_tuple=True)
            y = x[token] @ w[e].t()
            out.index_add_(0, token, y - y.mean(dim=0))  # rows of one expert meet: not the same over all rows
        return out

    x, w, ids = torch.randn(6, 4), torch.randn(2, 4, 4), torch.tensor([[0, 1], [1, 0], [0, 1], [1, 0], [0, 1], [1, 0]])
    with pytest.raises(NotCapturable, match="not row-wise"):
        grouped(run, (x, ids, w))


def test_a_generated_expert_loop_problem_gets_the_grouped_body_and_the_families_inside(tmp_path):
    from agents.offline.subgraph.solution import find
    from sol_bench.problem import load_problem
    from solforge.problems.generate import GenerateConfig, generate

    generate(tmp_path / "set", GenerateConfig(seed=11, count=1, families=("moe_expert_loop",), cpu_check_mib=64))
    (definition,) = list((tmp_path / "set").rglob("definition.json"))
    found = find(load_problem(Path(definition).parent))
    assert {"expert_loop", "grouped_mm", "histogram", "routing", "gated"} <= set(found.families), found.why


def test_the_subgraph_candidate_groups_the_loop_at_run_time_and_computes_the_reference(tmp_path):
    """As the judge's worker loads it (on the CPU): each signature's first call traces with its own inputs."""
    from agents.offline.subgraph import solution as subgraph_solution
    from sol_bench.inputs import make_inputs, output_specs
    from sol_bench.problem import load_problem
    from sol_bench.reference import load_reference
    from solforge.problems.generate import GenerateConfig, generate
    from tests.test_subgraph_candidates import _candidate_module

    generate(tmp_path / "set", GenerateConfig(seed=12, count=1, families=("moe_expert_loop",), cpu_check_mib=64))
    (definition,) = list((tmp_path / "set").rglob("definition.json"))
    problem = load_problem(Path(definition).parent)
    sol = subgraph_solution.solution(problem, subgraph_solution.find(problem))
    ref = load_reference(problem.definition)
    with _candidate_module(sol, tmp_path / "candidate", "loop_candidate") as module:
        for w in sorted(problem.workloads, key=problem.workload_bytes)[:2]:
            for seed in (4, 5):
                inputs = list(make_inputs(problem.definition, w, "cpu", seed=seed, reference=ref).values())
                outs = [torch.empty(s, dtype=dt) for s, dt in output_specs(problem.definition, w).values()]
                module.solforge_entry(*inputs, *outs)
                want = ref.run(*inputs)
                for got, want in zip(outs, (want,) if isinstance(want, torch.Tensor) else want, strict=True):
                    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
        told_lines = [r.description for done in module._runner.replaced.values() for r in done]
    assert len(module._runner.replaced) == 2 and sum("expert_loop" in d for d in told_lines) == 2


def _hf_layer(x, router_logits, w1, w2, w3):
    """A Mixtral-style sparse MoE block as the Hugging Face eager code writes it: a one-hot expert mask, then
    ``torch.where`` per expert, rows gathered with a leading None, three linears, index_add in the model dtype."""
    import torch.nn.functional as F

    weights = torch.softmax(router_logits, dim=1, dtype=torch.float)
    weights, chosen = torch.topk(weights, 2, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
    final = torch.zeros_like(x)
    mask = F.one_hot(chosen, num_classes=w1.shape[0]).permute(2, 1, 0)
    for e in range(w1.shape[0]):
        idx, top_x = torch.where(mask[e])
        rows = x[None, top_x].reshape(-1, x.shape[-1])
        y = F.linear(F.silu(F.linear(rows, w1[e])) * F.linear(rows, w3[e]), w2[e]) * weights[top_x, idx, None]
        final.index_add_(0, top_x, y.to(x.dtype))
    return final


@pytest.mark.parametrize("hidden,inter", [(16, 24), (12, 5)])  # 5: rows torch's grouped GEMM refuses (per group)
def test_the_hugging_face_form_groups_too(hidden, inter):
    def args(seed: int) -> tuple:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(7, hidden, generator=g)
        w1, w3 = torch.randn(5, inter, hidden, generator=g), torch.randn(5, inter, hidden, generator=g)
        return x, torch.randn(7, 5, generator=g), w1, torch.randn(5, hidden, inter, generator=g), w3

    gm = grouped(_hf_layer, args(0), check=[args(1)])
    assert [name for name, _ in grouped_loops(gm)] == ["expert_loop"]
    assert "nonzero" not in [target_name(n) for n in gm.graph.nodes]
    torch.testing.assert_close(gm(*args(2)), _hf_layer(*args(2)), rtol=1e-5, atol=1e-5)


def test_one_hot_with_classes_given_captures_with_fake_tensors():
    import torch.nn.functional as F

    def run(ids):
        return F.one_hot(ids, num_classes=6).sum(dim=(0, 1))

    ids = torch.tensor([[0, 5], [2, 2]])
    gm = capture(run, (ids,))
    assert "one_hot" not in [target_name(n) for n in gm.graph.nodes]
    assert torch.equal(gm(ids), run(ids))
    with pytest.raises(NotCapturable):  # no class count: the length is the data's
        capture(lambda i: F.one_hot(i), (ids,))


def _hf_layer_over_hit_experts(x, router_logits, w_gate_up, w_down):
    """The newer Hugging Face form: the loop runs over the experts that got tokens (``nonzero`` of the mask's
    counts), each a 0-d tensor indexing the mask and the weights (a host read per expert)."""
    import torch.nn.functional as F

    weights = torch.softmax(router_logits, dim=-1, dtype=torch.float)
    weights, chosen = torch.topk(weights, 2, dim=-1)
    weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
    final = torch.zeros_like(x)
    mask = F.one_hot(chosen, num_classes=w_gate_up.shape[0]).permute(2, 1, 0)
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    for e in hit:
        e = e[0]
        slot, token = torch.where(mask[e])
        gate, up = F.linear(x[token], w_gate_up[e]).chunk(2, dim=-1)
        y = F.linear(F.silu(gate) * up, w_down[e]) * weights[token, slot, None]
        final.index_add_(0, token, y.to(final.dtype))
    return final


def test_a_loop_over_the_experts_hit_groups_and_other_host_reads_are_refused():
    from agents.offline.subgraph.loops import trace_real

    def args(seed: int, tokens: int = 6) -> tuple:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(tokens, 16, generator=g), torch.randn(tokens, 5, generator=g),
                torch.randn(5, 48, 16, generator=g), torch.randn(5, 16, 24, generator=g))  # fmt: skip

    gm = grouped(_hf_layer_over_hit_experts, args(0, tokens=2), check=[args(1, tokens=2)])  # some experts unhit
    assert [name for name, _ in grouped_loops(gm)] == ["expert_loop"]
    torch.testing.assert_close(gm(*args(2, tokens=2)), _hf_layer_over_hit_experts(*args(2, tokens=2)))
    with pytest.raises(NotCapturable, match="read on the host"):  # a scale read on the host: not a loop index
        trace_real(lambda x: x * x.abs().max().item(), (torch.randn(3),))


def test_a_constant_read_past_the_dispatcher_is_caught_by_the_check_on_other_inputs():
    def run(x, ids, w):
        out = torch.zeros_like(x)
        for e in range(2):
            token, _ = torch.nonzero(ids == e, as_tuple=True)
            out.index_add_(0, token, x[token] @ w[e].t())
        return out * len(token.tolist())  # the last expert's rows, read with .tolist(): no .item() the trace sees

    w = torch.randn(2, 4, 4)
    one = (torch.randn(4, 4), torch.tensor([[0, 1], [1, 0], [0, 1], [1, 0]]), w)
    other = (torch.randn(4, 4), torch.tensor([[0, 1], [0, 1], [0, 1], [0, 0]]), w)  # 3 rows for expert 1, not 4
    assert grouped(run, one, check=[one])  # on the traced inputs the constant holds
    with pytest.raises(NotCapturable, match="disagrees"):
        grouped(run, one, check=[other])


def _deepseek_layer(x, topk_ids, topk_weight, w_up, w_down):
    """DeepSeek's ``moe_infer`` form: rows sorted by expert, each expert's slice cut by counts read on the host
    (``.cpu().numpy()``), the pieces joined with ``cat`` and put back in token order."""
    counts = topk_ids.new_zeros((topk_ids.shape[0], w_up.shape[0]))
    counts.scatter_(1, topk_ids, 1)
    per_expert = counts.sum(dim=0)
    order = topk_ids.view(-1).argsort()
    rows = x[order // topk_ids.shape[1]]
    pieces, start = [], 0
    for e, n in enumerate(per_expert.cpu().numpy()):
        if n == 0:
            continue
        pieces.append(torch.relu(rows[start:start + n] @ w_up[e].t()) @ w_down[e].t())
        start += n
    joined = torch.cat(pieces, dim=0)
    back = torch.empty_like(joined)
    back[order] = joined
    return (back.view(*topk_ids.shape, -1) * topk_weight.unsqueeze(-1)).sum(dim=1)


def test_the_deepseek_form_groups_its_slices_by_the_counts_tensor():
    def args(seed: int, tokens: int) -> tuple:
        g = torch.Generator().manual_seed(seed)
        ids = torch.topk(torch.randn(tokens, 6, generator=g), 2).indices
        return (torch.randn(tokens, 16, generator=g), ids, torch.rand(tokens, 2, generator=g),
                torch.randn(6, 8, 16, generator=g), torch.randn(6, 16, 8, generator=g))  # fmt: skip

    gm = grouped(_deepseek_layer, args(0, 3), check=[args(1, 3), args(2, 3)])  # 3 tokens: some experts unhit
    ops = [target_name(n) for n in gm.graph.nodes]
    assert ops.count("grouped_mm") == 2 and "cat" not in ops and "slice" not in ops
    torch.testing.assert_close(gm(*args(4, 3)), _deepseek_layer(*args(4, 3)), rtol=1e-5, atol=1e-5)


def test_slices_cut_by_counts_the_graph_does_not_hold_are_refused():
    def run(x, w):  # bounds from a Python list: no tensor in the graph says where each expert's rows end
        pieces, start = [], 0
        for e, n in enumerate([2, 1, 3]):
            pieces.append(x[start:start + n] @ w[e].t())
            start += n
        return torch.cat(pieces)

    with pytest.raises(NotCapturable, match="row counts"):
        grouped(run, (torch.randn(6, 4), torch.randn(3, 4, 4)))


def test_a_reference_that_fails_while_traced_is_not_capturable_not_a_crash():
    from agents.offline.subgraph.loops import captured

    def run(x):
        if x.sum() > 0:  # data-dependent: no fake-tensor trace; then it fails when run
            raise ValueError("refuses positive sums")
        return x

    with pytest.raises(NotCapturable, match="refuses positive sums"):
        captured(run, (torch.ones(3),))
