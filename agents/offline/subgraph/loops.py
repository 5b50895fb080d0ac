"""Expert loops: a MoE layer written as a Python loop over experts, made one grouped computation.

Eager MoE code often runs expert by expert: ``token, slot = torch.nonzero(ids == e, as_tuple=True)`` (or
``torch.where`` of a one-hot mask, over every expert or over those ``nonzero`` says got tokens), the routed rows
through expert ``e``'s weights (``w[e]``), and ``out.index_add_(0, token, y * weights[token, slot])``; or, as
DeepSeek's ``moe_infer`` does, rows sorted by expert cut into slices by counts read on the host, each slice
through its expert, the pieces joined with ``cat`` (the counts tensor is found in the graph by its values). Every
``nonzero`` (every count read on the host) is a host sync, so neither a fake-tensor trace nor a CUDA graph holds
it (``capture`` raises ``NotCapturable``). Here the reference is traced with real inputs (the loop unrolled over
the experts that got tokens), the unrolled iterations are checked to be one body differing only in the expert
index, and they are replaced by that body run once over every routed row sorted by expert: rows gathered in expert
order (or the sorted rows the slices were cut from), each ``mm`` with an expert's weight a grouped GEMM
(``stand_ins.GROUPED_MM``) over per-expert offsets counted with no host sync (``stand_ins.HISTOGRAM``, or the
counts tensor), row-wise ops as they are, and one ``index_add`` back (or the body's output where the ``cat`` was).
The result is traced again with fake tensors (its shapes now follow the inputs' alone) and checked against the
reference on the inputs given: experts with no tokens in the trace were not seen, so only the check says the loop
ran the same body over every expert.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import (
    disable_proxy_modes_tracing,
    get_innermost_proxy_mode,
    get_proxy_slot,
    make_fx,
)

from .capture import NotCapturable, capture, val
from .families.base import strip_casts
from .region import close, is_op
from .rewrite import Replaced
from .stand_ins import GROUPED_MM, HISTOGRAM, STAND_INS, stood_in, with_one_hot

aten = torch.ops.aten
_ADDS = (aten.index_add_.default, aten.index_add.default)
# ops that act on each routed row alone (or split its features): the same over all rows as over one expert's
_ROW_WISE = {"mul", "add", "sub", "div", "neg", "sigmoid", "silu", "gelu", "tanh", "relu", "exp", "pow", "rsqrt",
             "erf", "_to_copy", "clamp", "minimum", "maximum", "where", "split", "split_with_sizes", "chunk",
             "getitem", "square", "sqrt", "abs", "log", "softplus", "hardtanh", "leaky_relu", "elu"}  # fmt: skip
_LOOPS = "solforge_expert_loops"  # GraphModule.meta key: the grouped loops' iteration counts


@dataclass(frozen=True)
class _Iteration:
    add: Node  # the index_add onto the accumulator
    ids: Node  # the routing's expert ids, [tokens, slots]
    expert: int
    token: Node
    slot: Node | None
    body: tuple[Node, ...]  # the nodes that depend on this expert's tokens, in graph order (the add last)
    sources: tuple[Node, ...]  # eq, nonzero, unbind and the getitems that pick token and slot


def trace_real(fn: Callable[..., Any], args: Sequence[Any]) -> GraphModule:
    """``fn`` traced running on ``args``: Python control flow follows these inputs. A value read on the host
    with ``.item()`` from a ``nonzero`` result (``for e in (counts > 0).nonzero(): w[e]``: which experts got
    tokens) becomes a constant, as a loop's expert index is in ``for e in range(E)``; any other ``.item()``
    refuses the trace."""
    reads: list[Node | None] = []

    def host_read(t: torch.Tensor) -> Any:
        mode = get_innermost_proxy_mode()
        slot = get_proxy_slot(t, mode.tracer, None) if mode is not None else None
        reads.append(slot.proxy.node if slot is not None else None)
        with disable_proxy_modes_tracing():
            return t.item()

    table = {**STAND_INS, aten._local_scalar_dense.default: host_read}
    with torch.no_grad():
        gm = make_fx(with_one_hot(fn), tracing_mode="real", decomposition_table=table)(*args)
    if not all(n is not None and _from_nonzero(n) for n in reads):
        raise NotCapturable("a value read on the host (.item()) that is not an index from nonzero")
    return gm


def _upstream(node: Node, stop: Callable[[Node], bool] = lambda n: False) -> list[Node]:
    """``node`` and every node it is computed from, not looking past the nodes ``stop`` accepts."""
    todo, seen = [node], {}
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen[n] = None
        if not stop(n):
            todo.extend(n.all_input_nodes)
    return list(seen)


def _from_nonzero(node: Node) -> bool:
    return any(is_op(n, "nonzero") for n in _upstream(node))


def _mask_of(mask: Any) -> tuple[Node, int, int] | None:
    """(ids, expert, the mask's token dimension) for an expert's mask over a [tokens, slots] ``ids``:
    ``ids == e``, or ``one_hot(ids, E).permute(...)[e]`` (the Hugging Face layers' form), else None."""
    if is_op(mask, "eq") and isinstance(mask.args[1], int) and not isinstance(mask.args[1], bool):
        ids, expert, token_dim = mask.args[0], mask.args[1], 0
    elif is_op(mask, "select") and mask.args[1] == 0 and isinstance(mask.args[2], int) and is_op(mask.args[0],
                                                                                                   "permute"):
        perm = [d % 3 for d in mask.args[0].args[1]]
        hot = strip_casts(mask.args[0].args[0])
        one_hot = is_op(hot, "eq") and is_op(hot.args[0], "unsqueeze") and is_op(hot.args[1], "arange")
        if perm[0] != 2 or not one_hot:
            return None
        if hot.args[0].args[1] not in (-1, 2) or len(hot.args[1].args) != 1:
            return None
        ids, expert, token_dim = hot.args[0].args[0], mask.args[2], perm[1:].index(0)
    else:
        return None
    v = val(ids)
    return (ids, expert, token_dim) if v is not None and v.dim() == 2 and not v.is_floating_point() else None


def _routing_of(token: Node) -> tuple[Node, int, Node | None, tuple[Node, ...]] | None:
    """(ids, expert, slot, source nodes) for ``token``, the token column of ``nonzero`` of an expert's mask."""
    if token.target is not operator.getitem or not is_op(token.args[0], "unbind"):
        return None
    unbind = token.args[0]
    nz = unbind.args[0]
    if unbind.args[1:] not in ((1,), (-1,)) or not is_op(nz, "nonzero") or (mask := _mask_of(nz.args[0])) is None:
        return None
    ids, expert, token_dim = mask
    if token.args[1] != token_dim:
        return None
    slots = [u for u in unbind.users if u.target is operator.getitem and u.args[1] == 1 - token_dim]
    slot = slots[0] if slots else None
    return ids, expert, slot, (nz.args[0], nz, unbind, token, *slots)


def _body(add: Node, leaves: set[Node]) -> tuple[Node, ...]:
    """The nodes between ``leaves`` (token, slot) and the add's source that depend on a leaf, then the add."""
    return (*_body_to(add.args[3], leaves), add)


def _chain(last: Node) -> list[Node]:
    """The index_adds feeding one another ending at ``last``, first first."""
    chain = [last]
    while isinstance(prev := chain[-1].args[0], Node) and prev.target in _ADDS:
        chain.append(prev)
    return chain[::-1]


def _loops(gm: GraphModule) -> list[list[_Iteration]]:
    """Chains of index_adds (dim 0) each indexed by the token column of ``nonzero`` of an expert's mask, one
    ids per chain and each expert once: the unrolled loops."""
    adds = [n for n in gm.graph.nodes if n.target in _ADDS]
    lasts = [n for n in adds if not any(u.target in _ADDS and u.args[0] is n for u in n.users)]
    found = []
    for last in lasts:
        its, ids_seen = [], set()
        for add in _chain(last):
            routing = _routing_of(add.args[2]) if add.args[1] == 0 and not add.kwargs else None
            if routing is None:
                break
            ids, expert, slot, sources = routing
            ids_seen.add(ids)
            leaves = {add.args[2]} | ({slot} if slot is not None else set())
            its.append(_Iteration(add, ids, expert, add.args[2], slot, _body(add, leaves), sources))
        else:
            if len(ids_seen) == 1 and len({it.expert for it in its}) == len(its):
                found.append(its)
    return found


def _canon(body: Sequence[Node], leaves: dict[Node, str], expert: int, end: Node | None = None) -> list[Any]:
    """``body`` with its own nodes numbered, its leaves (token, slot, rows) and expert index named, ``end``'s
    first argument (the accumulator) left out: equal for two iterations exactly when they compute the same on
    their own experts."""
    own = {n: i for i, n in enumerate(body)}
    memo: dict[Node, Any] = {}

    def arg(a: Any) -> Any:
        if isinstance(a, Node):
            if a in leaves:
                return leaves[a]
            if a in own:
                return ("own", own[a])
            return outside(a)
        if isinstance(a, (list, tuple)):
            return tuple(arg(x) for x in a)
        return a

    def outside(n: Node) -> Any:
        if n not in memo:
            if n.op != "call_function":
                memo[n] = n.name
            elif is_op(n, "select") and n.args[1] == 0 and n.args[2] == expert:
                memo[n] = ("EXPERT", arg(n.args[0]))
            else:
                memo[n] = (str(n.target), arg(n.args), tuple(sorted((k, arg(v)) for k, v in n.kwargs.items())))
        return memo[n]

    return [(str(n.target), arg(n.args[1:] if n is end else n.args), arg(tuple(sorted(n.kwargs.items()))))
            for n in body]  # fmt: skip


def _canon_of(it: _Iteration) -> list[Any]:
    leaves = {it.token: "TOKEN"} | ({it.slot: "SLOT"} if it.slot is not None else {})
    return _canon(it.body, leaves, it.expert, it.add)


def _untransposed(b: Any) -> tuple[Any, bool]:
    """(what ``b`` is the 2-D transpose of, True) where it is one (``t``, or ``transpose``/``permute`` swapping the
    two dims), else (``b``, False)."""
    v = val(b)
    swaps = is_op(b, "t") or (is_op(b, "transpose") and {d % 2 for d in b.args[1:3]} == {0, 1}) or (
        is_op(b, "permute") and [d % 2 for d in b.args[1]] == [1, 0])
    return (b.args[0], True) if swaps and v is not None and v.dim() == 2 else (b, False)


def _expert_weight(b: Any, expert: int) -> tuple[Node, bool] | None:
    """(stacked weights W, transposed) for ``b`` = ``W[expert]`` or its transpose, else None."""
    b, transposed = _untransposed(b)
    w = b.args[0] if is_op(b, "select") else None
    if w is not None and b.args[1] == 0 and b.args[2] == expert and val(w) is not None and val(w).dim() == 3:
        return w, transposed
    return None


def _grouped_body(call: Callable[..., Node], body: Sequence[Node], env: dict[Node, Node], expert: int,
                  counts_of: Callable[[int], Node]) -> int:  # fmt: skip
    """Map ``body`` (one expert's nodes, in order) into ``env`` over every routed row: each ``mm`` by the expert's
    weight a grouped GEMM over the offsets of ``counts_of(experts)``, row-wise ops as they are. Returns how many
    experts the weights are stacked over (raises ``NotCapturable``)."""
    offs, experts = None, None
    for n in body:
        if is_op(n, "mm") and n.args[0] in env and n.args[1] not in env:
            weight = _expert_weight(n.args[1], expert)
            if weight is None:
                raise NotCapturable(f"expert loop: {n.name} multiplies by something not an expert's weight")
            w, transposed = weight
            if experts not in (None, val(w).shape[0]):
                raise NotCapturable(f"expert loop: weights stacked over {experts} and {val(w).shape[0]} experts")
            experts = val(w).shape[0]
            if offs is None:
                offs = call(aten._to_copy.default, (call(aten.cumsum.default, (counts_of(experts), 0)),),
                            {"dtype": torch.int32})  # fmt: skip
            b = call(aten.transpose.int, (w, -2, -1)) if transposed else w
            env[n] = call(GROUPED_MM.default, (env[n.args[0]], b, offs))
        elif is_op(n, "index") and n.args[0] not in env and all(i in env or i is None for i in n.args[1]):
            env[n] = call(aten.index.Tensor, (n.args[0], [env.get(i) for i in n.args[1]]))
        elif is_op(n, "view", "_unsafe_view", "reshape") and n.args[0] in env and n.args[1][:1] == [-1]:
            env[n] = call(aten.reshape.default, (env[n.args[0]], list(n.args[1])))  # rows stay rows
        elif n.target is operator.getitem or (is_op(n, *_ROW_WISE) and not _mixes_rows(n, env)):
            env[n] = call(n.target, _mapped(n.args, env), _mapped(n.kwargs, env))
        else:
            raise NotCapturable(f"expert loop: {n.format_node()[:120]} is not row-wise")
    if experts is None:
        raise NotCapturable("expert loop: no GEMM by an expert's weight")
    return experts


def _inserter(gm: GraphModule, before: Node) -> Callable[..., Node]:
    def call(target: Any, args: tuple, kwargs: dict | None = None) -> Node:
        with gm.graph.inserting_before(before):
            return gm.graph.call_function(target, args, kwargs or {})

    return call


def _erase(gm: GraphModule, doomed: set[Node]) -> None:
    for n in reversed([m for m in gm.graph.nodes if m in doomed]):
        if not n.users:
            gm.graph.erase_node(n)


def _group(gm: GraphModule, its: list[_Iteration]) -> None:
    """Replace one loop's iterations by its first body over all routed rows (raises ``NotCapturable``).

    The new nodes go where the loop ends, after everything its first body reads."""
    first, last = its[0], its[-1].add
    top_k = val(first.ids).shape[1]
    call = _inserter(gm, last)
    flat = call(aten.reshape.default, (first.ids, [-1]))
    order = call(operator.getitem, (call(aten.sort.stable, (flat,), {"stable": True}), 1))
    env: dict[Node, Node] = {first.token: call(aten.floor_divide.default, (order, top_k))}
    if first.slot is not None:
        env[first.slot] = call(aten.remainder.Scalar, (order, top_k))
    experts = _grouped_body(call, first.body[:-1], env, first.expert, lambda e: call(HISTOGRAM.default, (flat, e)))
    if any(not 0 <= it.expert < experts for it in its):
        raise NotCapturable("expert loop: an expert index outside the stacked weights")
    summed = call(aten.index_add.default, (first.add.args[0], 0, env[first.token], env[first.add.args[3]]))
    last.replace_all_uses_with(summed)
    _erase(gm, {n for it in its for n in (*it.body, *it.sources)})


def _mixes_rows(n: Node, env: dict[Node, Node]) -> bool:
    """Whether a row-wise op would split along the rows, or meet a tensor with rows of its own (not broadcast)."""
    routed = [v for v in (val(a) for a in n.all_input_nodes if a in env) if v is not None]
    width = max((v.dim() for v in routed), default=0)
    if is_op(n, "split", "split_with_sizes", "chunk"):
        dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", 0)
        return not width or dim % width == 0
    others = [val(a) for a in n.all_input_nodes if a not in env]
    return any(o is None or (o.dim() >= width and o.shape[0] != 1 and o.numel() > 1) for o in others)


def _mapped(a: Any, env: dict[Node, Node]) -> Any:
    if isinstance(a, Node):
        return env.get(a, a)
    if isinstance(a, (list, tuple)):
        return type(a)(_mapped(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _mapped(v, env) for k, v in a.items()}
    return a


@dataclass(frozen=True)
class _Segment:
    """One expert's rows as a slice of rows sorted by expert (``sorted[start:end]``, bounds read on the host),
    through its body to one of the pieces a ``cat`` joins."""

    rows: Node  # the slice
    start: int
    end: int
    expert: int
    body: tuple[Node, ...]  # the nodes that depend on the slice, in graph order, ending at the cat's piece


def _segment_loops(gm: GraphModule) -> list[tuple[Node, list[_Segment]]]:
    """``cat`` nodes (dim 0) whose every piece is a body over consecutive slices of one tensor covering all of
    its rows, each multiplying by a stacked weight's expert in increasing order: the DeepSeek form of the loop."""
    found = []
    for cat in [n for n in gm.graph.nodes if is_op(n, "cat") and (n.args[1:] or n.kwargs.get("dim", 0)) in ((0,), 0)]:
        pieces = cat.args[0]
        slices = [_slice_under(p) for p in pieces]
        if not pieces or any(x is None for x in slices) or len({x.args[0] for x in slices}) != 1:
            continue
        segs = []
        for piece, sl in zip(pieces, slices):
            body = _body_to(piece, {sl})
            experts = {w.args[2] for w in _selects(body)}
            if len(experts) != 1:
                break
            segs.append(_Segment(sl, sl.args[2], sl.args[3], experts.pop(), body))
        else:
            bounds = [(x.start, x.end) for x in segs]
            rows = val(slices[0].args[0]).shape[0]
            consecutive = bounds[0][0] == 0 and bounds[-1][1] == rows and all(
                a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            if consecutive and all(a.expert < b.expert for a, b in zip(segs, segs[1:])):
                found.append((cat, segs))
    return found


def _slice_under(piece: Node) -> Node | None:
    """The one dim-0 slice with int bounds that ``piece`` is computed from, else None."""

    def cut(n: Node) -> bool:
        return is_op(n, "slice") and n.args[1:2] == (0,) and all(isinstance(b, int) for b in n.args[2:4])

    hits = [n for n in _upstream(piece, cut) if cut(n)]
    return hits[0] if len(hits) == 1 else None


def _body_to(out: Node, leaves: set[Node]) -> tuple[Node, ...]:
    """The nodes between ``leaves`` and ``out`` (included) that depend on a leaf, in graph order."""
    order = {n: i for i, n in enumerate(out.graph.nodes)}
    dependent: dict[Node, bool] = {}

    def depends(n: Node) -> bool:
        if n in leaves:
            return True
        if n not in dependent:
            dependent[n] = any([depends(a) for a in n.all_input_nodes])  # every input visited: no short cut
        return dependent[n]

    depends(out)
    return tuple(sorted([n for n, d in dependent.items() if d], key=order.__getitem__))


def _selects(body: Sequence[Node]) -> list[Node]:
    """The selects ``W[e]`` (int e, dim 0) that the body's GEMMs multiply by, transposed or not."""
    out = []
    for n in body:
        if is_op(n, "mm"):
            b, _ = _untransposed(n.args[1])
            if is_op(b, "select") and b.args[1] == 0 and isinstance(b.args[2], int):
                out.append(b)
    return out


def _counts(gm: GraphModule, args: Sequence[Any], segs: list[_Segment], experts: int) -> Node:
    """The graph's node holding each expert's row count (the one whose values the slice bounds were read from),
    found by its values on ``args``: integer, one per expert, equal to each slice's length and 0 elsewhere."""
    want = [0] * experts
    for x in segs:
        if not 0 <= x.expert < experts:
            raise NotCapturable("expert loop: an expert index outside the stacked weights")
        want[x.expert] = x.end - x.start
    values: dict[Node, Any] = {}

    class Keep(torch.fx.Interpreter):
        def run_node(self, n: Node) -> Any:
            out = super().run_node(n)
            if isinstance(out, torch.Tensor) and out.dim() == 1 and out.numel() == experts:
                values[n] = out.clone()
            return out

    with torch.no_grad():
        Keep(gm).run(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    for n, v in values.items():
        if not v.is_floating_point() and v.tolist() == want:
            return n
    raise NotCapturable("expert loop: no tensor in the graph holds the experts' row counts the slices were cut by")


def _group_segments(gm: GraphModule, cat: Node, segs: list[_Segment], args: Sequence[Any]) -> None:
    first = segs[0]
    leaves = {first.rows: "ROWS"}
    if any(_canon(x.body, {x.rows: "ROWS"}, x.expert) != _canon(first.body, leaves, first.expert) for x in segs[1:]):
        raise NotCapturable("expert loop: its iterations differ beyond the expert index")
    call = _inserter(gm, cat)
    env: dict[Node, Node] = {first.rows: first.rows.args[0]}
    found: dict[str, Node] = {}

    def counts_of(experts: int) -> Node:
        found["counts"] = _counts(gm, args, segs, experts)
        return found["counts"]

    _grouped_body(call, first.body, env, first.expert, counts_of)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    if order[found["counts"]] > order[cat]:
        raise NotCapturable("expert loop: the experts' row counts are computed after the loop")
    cat.replace_all_uses_with(env[first.body[-1]])
    _erase(gm, {cat} | {n for x in segs for n in (*x.body, x.rows)})


def grouped(fn: Callable[..., Any], args: Sequence[Any], check: Sequence[Sequence[Any]] = ()) -> GraphModule:
    """The reference with its expert loops grouped, traced with fake tensors, and checked against ``fn`` on each
    input set of ``check`` (the same shapes; default: ``args``). ``NotCapturable`` where it has no expert loop,
    where one is not one body over the experts, where something data-dependent stays, or where a check fails.

    A host read the dispatcher sees (``.item()``) is refused unless it is a loop's index; one it does not see
    (``.tolist()``, ``.numpy()``) leaves a constant that only a check on other inputs can catch."""
    gm = trace_real(fn, args)
    loops, segmented = _loops(gm), _segment_loops(gm)
    if not loops and not segmented:
        raise NotCapturable("no expert loop in a reference that needs real inputs to trace")
    for cat, segs in segmented:  # counts found by value: before anything in the graph changes
        _group_segments(gm, cat, segs, args)
    for its in loops:
        if any(_canon_of(it) != _canon_of(its[0]) for it in its[1:]):
            raise NotCapturable("expert loop: its iterations differ beyond the expert index")
        _group(gm, its)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    gm = capture(gm, args)
    if not all(agrees(gm, fn, inputs) for inputs in (check or (args,))):
        raise NotCapturable("expert loop: the grouped graph disagrees with the reference")
    gm.meta[_LOOPS] = [len(segs) for _, segs in segmented] + [len(its) for its in loops]
    return gm


def captured(fn: Callable[..., Any], args: Sequence[Any]) -> GraphModule:
    """``capture``, and where that fails, the expert loops grouped on ``args`` (real inputs, the check's too);
    ``NotCapturable`` naming both reasons where neither holds."""
    try:
        return capture(fn, args)
    except NotCapturable as e:
        try:
            return grouped(fn, args)
        except NotCapturable as loop:
            raise NotCapturable(f"{e}; {loop}") from loop
        except Exception as failed:  # noqa: BLE001 - a reference that does not run traced, a graph that breaks
            raise NotCapturable(f"{e}; expert loops: {type(failed).__name__}: {str(failed)[:200]}") from failed


def grouped_loops(gm: GraphModule) -> list[tuple[str, str]]:
    """("expert_loop", what was grouped) per loop ``grouped`` replaced in ``gm``."""
    return [("expert_loop", f"expert_loop: a loop seen over {n} experts run as one grouped body")
            for n in gm.meta.get(_LOOPS, ())]  # fmt: skip


def accounted(gm: GraphModule, done: Sequence[Replaced]) -> list[Replaced]:
    """Everything replaced in ``gm``: the expert loops grouped, ``done`` (the families' regions), then the
    stand-ins the capture put in (what a candidate tells and what makes it worth planning)."""
    stand_ins = [Replaced(name, f"{name}: {why}") for name, why in stood_in(gm)]
    return [*(Replaced(name, what) for name, what in grouped_loops(gm)), *done, *stand_ins]


def agrees(gm: GraphModule, fn: Callable[..., Any], args: Sequence[Any]) -> bool:
    """Whether ``gm`` computes what ``fn`` does on ``args`` (the region tolerance of each output's dtype)."""
    with torch.no_grad():
        got, want = gm(*args), fn(*args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    return len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))
