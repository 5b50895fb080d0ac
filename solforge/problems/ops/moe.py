"""Mixture-of-experts problems: routing (softmax top-k, DeepSeek group-limited sigmoid) and the whole MoE layer."""

from __future__ import annotations

from typing import Any

from ..draft import ProblemDraft
from .common import SHORT, Rows, const, problem, source, tensor, tolerance, with_init

# Routing returns expert ids: they must match exactly (rtol times an id below 256 stays under 1).
_ROUTE_TOL = {"max_atol": 1e-5, "max_rtol": 1e-4}

_SOFTMAX_TOPK = '''
import torch

TOP_K = $TOP_K
RENORMALIZE = $RENORMALIZE

def run(router_logits):
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, TOP_K, dim=-1)  # sorted, largest first
    if RENORMALIZE:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids
'''

_GROUPED_TOPK = '''
import torch

TOP_K = $TOP_K
GROUPS = $GROUPS
TOP_GROUPS = $TOP_GROUPS
SCALE = $SCALE

def run(router_logits, correction_bias):
    t, e = router_logits.shape
    scores = torch.sigmoid(router_logits.float())
    # The bias steers which experts are chosen; the weights come from the unbiased scores.
    choice = scores + correction_bias.float()
    group_score = choice.view(t, GROUPS, e // GROUPS).topk(2, dim=-1).values.sum(dim=-1)
    top_groups = group_score.topk(TOP_GROUPS, dim=-1).indices
    group_mask = torch.zeros(t, GROUPS, dtype=torch.bool, device=choice.device)
    group_mask.scatter_(1, top_groups, True)
    expert_mask = group_mask.repeat_interleave(e // GROUPS, dim=1)
    masked = choice.masked_fill(~expert_mask, float("-inf"))
    ids = masked.topk(TOP_K, dim=-1).indices  # sorted, largest first
    weights = scores.gather(1, ids)
    weights = weights / weights.sum(dim=-1, keepdim=True) * SCALE
    return weights, ids
'''

_MOE_LAYER = '''
import torch

EXPERTS = $EXPERTS
TOP_K = $TOP_K
RENORMALIZE = $RENORMALIZE

def swiglu_mlp(x, w_gate, w_up, w_down):
    g = x @ w_gate.t()
    return ((g * torch.sigmoid(g)) * (x @ w_up.t())) @ w_down.t()

def run($ARGS):
    t, h = x.shape
    # Router in float32 so that near-ties between experts do not depend on bf16 rounding.
    probs = torch.softmax(x.float() @ gate_weight.float().t(), dim=-1)
    weights, ids = torch.topk(probs, TOP_K, dim=-1)
    if RENORMALIZE:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    # Sort the (token, slot) pairs by expert and gather their rows: each expert owns one contiguous segment.
    flat_ids = ids.reshape(-1)
    order = torch.argsort(flat_ids, stable=True)
    token_of = order // TOP_K
    rows = x[token_of]
    counts = (flat_ids[:, None] == torch.arange(EXPERTS, device=x.device)[None, :]).sum(dim=0)
    offsets = torch.cumsum(counts, dim=0).to(torch.int32)
    # Grouped GEMMs: segment e of the rows meets expert e's weights.
    g = torch._grouped_mm(rows, w_gate.transpose(-2, -1), offs=offsets)
    u = torch._grouped_mm(rows, w_up.transpose(-2, -1), offs=offsets)
    act = (g.float() * torch.sigmoid(g.float()) * u.float()).to(x.dtype)
    y = torch._grouped_mm(act, w_down.transpose(-2, -1), offs=offsets)
    # Weighted scatter-add of every expert output back to its token, accumulated in float32.
    out = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    out.index_add_(0, token_of, y.float() * weights.reshape(-1)[order][:, None])
$SHARED    return out.to(x.dtype)
'''

_SHARED = '''    # Shared expert, always on, scaled by its own sigmoid gate.
    shared = swiglu_mlp(x, shared_gate, shared_up, shared_down).float()
    out = out + torch.sigmoid((x @ shared_gate_weight.t()).float()) * shared
'''


def _routing(*, name: str, summary: str, reference: str, experts: int, top_k: int, rows: Rows,
             extra: dict[str, dict[str, Any]] | None = None) -> ProblemDraft:  # fmt: skip
    """A routing problem: router logits [T, E] (float32), ``extra`` inputs after them, to the weights and ids of
    each token's top-k experts."""
    return problem(
        name=name, level="L1", op_type="moe_routing", summary=summary,
        axes={**rows.axis_defs, "E": const(experts), "K": const(top_k)},
        inputs={"router_logits": tensor(["T", "E"], "float32"), **(extra or {})},
        outputs={"weights": tensor(["T", "K"], "float32"), "ids": tensor(["T", "K"], "int64")},
        reference=reference,
        sizes=rows.sizes, tol=_ROUTE_TOL,
        tags=("moe", "routing", "topk", "forward"),
    )  # fmt: skip


def softmax_topk(*, experts: int, top_k: int, renormalize: bool, rows: Rows):
    return _routing(
        name=f"moe_softmax_topk_e{experts}_k{top_k}{'_renorm' if renormalize else ''}",
        summary=f"MoE routing: softmax over {experts} router logits (float32), top-{top_k} experts"
        f"{', weights renormalised to sum to one' if renormalize else ''}. Outputs sorted largest first.",
        reference=source(_SOFTMAX_TOPK, TOP_K=top_k, RENORMALIZE=renormalize),
        experts=experts, top_k=top_k, rows=rows,
    )  # fmt: skip


def grouped_topk(*, experts: int, top_k: int, groups: int, top_groups: int, scale: float, rows: Rows):
    return _routing(
        name=f"moe_grouped_sigmoid_topk_e{experts}_k{top_k}_g{groups}_tg{top_groups}",
        summary=f"Group-limited MoE routing: sigmoid scores of {experts} experts plus a correction bias, the best "
        f"{top_groups} of {groups} groups (by the sum of each group's two best), top-{top_k} experts inside them; "
        f"weights from the unbiased scores, normalised and scaled by {scale}. float32.",
        reference=source(_GROUPED_TOPK, TOP_K=top_k, GROUPS=groups, TOP_GROUPS=top_groups, SCALE=float(scale)),
        experts=experts, top_k=top_k, rows=rows, extra={"correction_bias": tensor(["E"], "float32")},
    )  # fmt: skip


def moe_layer(*, hidden: int, intermediate: int, experts: int, top_k: int, renormalize: bool, dtype: str,
              rows: Rows, shared_intermediate: int = 0):  # fmt: skip
    shared = shared_intermediate > 0
    name = (f"moe_layer_h{hidden}_i{intermediate}_e{experts}_k{top_k}{'_renorm' if renormalize else ''}"
            f"{f'_shared{shared_intermediate}' if shared else ''}_{SHORT[dtype]}")  # fmt: skip
    inputs = {"x": tensor(["T", "H"], dtype), "gate_weight": tensor(["E", "H"], dtype),
              "w_gate": tensor(["E", "I", "H"], dtype), "w_up": tensor(["E", "I", "H"], dtype),
              "w_down": tensor(["E", "H", "I"], dtype)}
    axes = {**rows.axis_defs, "H": const(hidden), "I": const(intermediate), "E": const(experts)}
    shared_expert = ""
    if shared:
        axes["IS"] = const(shared_intermediate)
        inputs |= {"shared_gate": tensor(["IS", "H"], dtype), "shared_up": tensor(["IS", "H"], dtype),
                   "shared_down": tensor(["H", "IS"], dtype), "shared_gate_weight": tensor(["1", "H"], dtype)}
        shared_expert = f", plus a sigmoid-gated shared expert of {shared_intermediate}"
    kinds = {n: "weight" for n in inputs if n.startswith("shared")}
    kinds |= {"w_gate": "stacked_weight", "w_up": "stacked_weight", "w_down": "stacked_weight"}
    return problem(
        name=name, level="L2", op_type="moe_layer",
        summary=f"Sparse MoE layer: router over {experts} experts, top-{top_k}{' renormalised' if renormalize else ''}"
        f", token rows gathered per expert, grouped SwiGLU expert MLPs ({hidden} -> {intermediate} -> {hidden}), "
        f"weighted scatter-add back{shared_expert}; {dtype}.",
        axes=axes,
        inputs=inputs,
        outputs={"y": tensor(["T", "H"], dtype)},
        reference=with_init(source(_MOE_LAYER, raw={"ARGS": ", ".join(inputs), "SHARED": _SHARED if shared else ""},
                                   EXPERTS=experts, TOP_K=top_k, RENORMALIZE=renormalize), inputs, dtype, kinds),
        sizes=rows.sizes, tol=tolerance(dtype, "block"),
        tags=("moe", "grouped_gemm", "forward"),
    )  # fmt: skip
