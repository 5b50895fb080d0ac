"""Expert loops: a MoE layer written as a Python loop over experts, made one grouped computation.

Eager MoE code often runs expert by expert: ``token, slot = torch.nonzero(ids == e, as_tuple=True)`` (or
``torch.where`` of a one-hot mask, over every expert or over those ``nonzero`` says got tokens), the routed rows
through expert ``e``'s weights (``w[e]``), and ``out.index_add_(0, token, y * weights[token, slot])``.
Every ``nonzero`` reads its count on the host, so neither a fake-tensor trace nor a CUDA graph holds it
(``capture`` raises ``NotCapturable``). Here the reference is traced with real inputs (the loop unrolled over the
experts that got tokens), the unrolled iterations are checked to be one body differing only in the expert index,
and they are replaced by that body run once over every routed row sorted by expert: rows gathered in expert
order, each ``mm`` with an expert's weight a grouped GEMM (``stand_ins.GROUPED_MM``) over per-expert offsets
counted with no host sync (``stand_ins.HISTOGRAM``), row-wise ops as they are, and one ``index_add`` back. The
result is traced again with fake tensors (its shapes now follow the inputs' alone) and checked against the
reference on the inputs given: experts with no tokens in the trace were not seen, so only the check says the
loop ran the same body over every expert.

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import functools
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
from .region import is_op
from .stand_ins import GROUPED_MM, HISTOGRAM, STAND_INS, OneHot

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

    @functools.wraps(fn)  # the trace names its inputs after fn's parameters
    def traced(*a: Any) -> Any:
        with OneHot():
            return fn(*a)

    table = {**STAND_INS, aten._local_scalar_dense.default: host_read}
    with torch.no_grad():
        gm = make_fx(traced, tracing_mode="real", decomposition_table=table)(*args)
    if not all(n is not None and _from_nonzero(n) for n in reads):
        raise NotCapturable("a value read on the host (.item()) that is not an index from nonzero")
    return gm


def _from_nonzero(node: Node) -> bool:
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if is_op(n, "nonzero"):
            return True
        todo.extend(n.all_input_nodes)
    return False


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
    """The nodes between ``leaves`` (token, slot) and the add's source that depend on a leaf."""
    order = {n: i for i, n in enumerate(add.graph.nodes)}
    dependent: dict[Node, bool] = {}

    def depends(n: Node) -> bool:
        if n in leaves:
            return True
        if n not in dependent:
            dependent[n] = any([depends(a) for a in n.all_input_nodes])  # every input visited: no short cut
        return dependent[n]

    depends(add.args[3])
    return tuple(sorted([n for n, d in dependent.items() if d] + [add], key=order.__getitem__))


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


def _canon(it: _Iteration) -> list[Any]:
    """The iteration's body with its own nodes numbered, its token, slot and expert index named: equal for two
    iterations exactly when they compute the same on their own experts."""
    own = {n: i for i, n in enumerate(it.body)}
    memo: dict[Node, Any] = {}

    def arg(a: Any) -> Any:
        if isinstance(a, Node):
            if a is it.token:
                return "TOKEN"
            if a is it.slot:
                return "SLOT"
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
            elif is_op(n, "select") and n.args[1] == 0 and n.args[2] == it.expert:
                memo[n] = ("EXPERT", arg(n.args[0]))
            else:
                memo[n] = (str(n.target), arg(n.args), tuple(sorted((k, arg(v)) for k, v in n.kwargs.items())))
        return memo[n]

    return [(str(n.target), arg(n.args[1:] if n is it.add else n.args), arg(tuple(sorted(n.kwargs.items()))))
            for n in it.body]  # fmt: skip


def _expert_weight(b: Any, expert: int) -> tuple[Node, bool] | None:
    """(stacked weights W, transposed) for ``b`` = ``W[expert]`` or its transpose, else None."""
    transposed = False
    v = val(b)
    swaps = is_op(b, "t") or (is_op(b, "transpose") and {d % 2 for d in b.args[1:3]} == {0, 1}) or (
        is_op(b, "permute") and [d % 2 for d in b.args[1]] == [1, 0])
    if swaps:
        if v is None or v.dim() != 2:
            return None
        b, transposed = b.args[0], True
    w = b.args[0] if is_op(b, "select") else None
    if w is not None and b.args[1] == 0 and b.args[2] == expert and val(w) is not None and val(w).dim() == 3:
        return w, transposed
    return None


def _group(gm: GraphModule, its: list[_Iteration]) -> None:
    """Replace one loop's iterations by its first body over all routed rows (raises ``NotCapturable``).

    The new nodes go where the loop ends, after everything its first body reads."""
    first, last = its[0], its[-1].add
    ids = first.ids
    top_k = val(ids).shape[1]
    g = gm.graph

    def call(target: Any, args: tuple, kwargs: dict | None = None) -> Node:
        with g.inserting_before(last):
            return g.call_function(target, args, kwargs or {})

    flat = call(aten.reshape.default, (ids, [-1]))
    order = call(operator.getitem, (call(aten.sort.stable, (flat,), {"stable": True}), 1))
    env: dict[Node, Node] = {first.token: call(aten.floor_divide.default, (order, top_k))}
    if first.slot is not None:
        env[first.slot] = call(aten.remainder.Scalar, (order, top_k))
    offs, experts = None, None
    for n in first.body[:-1]:
        if is_op(n, "mm") and n.args[0] in env and n.args[1] not in env:
            weight = _expert_weight(n.args[1], first.expert)
            if weight is None:
                raise NotCapturable(f"expert loop: {n.name} multiplies by something not an expert's weight")
            w, transposed = weight
            if experts not in (None, val(w).shape[0]):
                raise NotCapturable(f"expert loop: weights stacked over {experts} and {val(w).shape[0]} experts")
            experts = val(w).shape[0]
            if offs is None:
                counts = call(HISTOGRAM.default, (flat, experts))
                offs = call(aten._to_copy.default, (call(aten.cumsum.default, (counts, 0)),), {"dtype": torch.int32})
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
    if experts is None or any(not 0 <= it.expert < experts for it in its):
        raise NotCapturable("expert loop: no expert weights, or an expert index outside them")
    summed = call(aten.index_add.default, (first.add.args[0], 0, env[first.token], env[first.add.args[3]]))
    last.replace_all_uses_with(summed)
    doomed = {n for it in its for n in (*it.body, *it.sources)}
    for n in reversed([m for m in g.nodes if m in doomed]):
        if not n.users:
            g.erase_node(n)


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


def grouped(fn: Callable[..., Any], args: Sequence[Any], check: Sequence[Sequence[Any]] = ()) -> GraphModule:
    """The reference with its expert loops grouped, traced with fake tensors, and checked against ``fn`` on each
    input set of ``check`` (the same shapes; default: ``args``). ``NotCapturable`` where it has no expert loop,
    where one is not one body over the experts, where something data-dependent stays, or where a check fails.

    A host read the dispatcher sees (``.item()``) is refused unless it is a loop's index; one it does not see
    (``.tolist()``, ``.numpy()``) leaves a constant that only a check on other inputs can catch."""
    gm = trace_real(fn, args)
    loops = _loops(gm)
    if not loops:
        raise NotCapturable("no expert loop in a reference that needs real inputs to trace")
    for its in loops:
        if any(_canon(it) != _canon(its[0]) for it in its[1:]):
            raise NotCapturable("expert loop: its iterations differ beyond the expert index")
        _group(gm, its)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    gm = capture(gm, args)
    if not all(agrees(gm, fn, inputs) for inputs in (check or (args,))):
        raise NotCapturable("expert loop: the grouped graph disagrees with the reference")
    gm.meta[_LOOPS] = [len(its) for its in loops]
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


def told(gm: GraphModule) -> list[tuple[str, str]]:
    """("expert_loop", what was grouped) per loop ``grouped`` replaced in ``gm``."""
    return [("expert_loop", f"expert_loop: a loop seen over {n} experts run as one grouped body")
            for n in gm.meta.get(_LOOPS, ())]  # fmt: skip


def agrees(gm: GraphModule, fn: Callable[..., Any], args: Sequence[Any]) -> bool:
    """Whether ``gm`` computes what ``fn`` does on ``args`` (the region tolerance of each output's dtype)."""
    from .region import close

    with torch.no_grad():
        got, want = gm(*args), fn(*args)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    return len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))
