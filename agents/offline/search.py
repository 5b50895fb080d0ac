"""Which planned candidate to try next, given the judge's verdicts so far (deterministic).

Order: (0) while no candidate of the problem has passed and no floor awaits its verdict, the next untried
floor (``Option.floor``: sure passes, in plan order), so that a small budget still ends with a passing
candidate; once one has passed, the floors left are not tried (a sure pass adds nothing then); (1) the first variant of
each template group not tried yet, in plan order (and any reference-derived group planned ahead of all
templates), so every family and language is measured once before any budget goes to tuning (with ``priors``
from kin problems, the groups and points that won there first: ``transfer.py``); (2) unless the bar
(``Option.bar``: the reference's best bet, T_b's ways) is measured already, the reference's first planned
candidate after the templates, once: the bar the templates have to clear, measured before the climb, so a small
budget still holds the reference's best bet where no template beats it; (3) untried grid neighbours (one
parameter one step up or down) of each group's fastest passing variant, the fastest group first: a hill
climb that follows measured latency and stops where no neighbour is faster; (4) the first variant of each
remaining group (the other reference-derived ones, each costly to compile); (5) the rest in plan order.
Options the agent could not make (``unavailable``, e.g. an export Inductor refused) count as absent.
Skipped: variants already proposed; groups whose attempts crashed or failed to build with none passing;
groups that after ``drop_after`` judged tries are all slower than the best other group by more than
``drop_margin`` (a failed variant counts as infinitely slow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..base import AttemptFeedback
from .transfer import Priors

BROKEN = frozenset({"COMPILE_ERROR", "RUNTIME_ERROR"})
REFERENCE_PREFIX = "reference/"  # groups of candidates derived from the reference (agent.plan names them so)


@dataclass(frozen=True)
class Option:
    name: str
    group: str
    params: Mapping[str, Any]
    floor: bool = False  # a sure pass, proposed first while nothing has passed
    bar: bool = False  # the reference's best bet: the time templates must beat


@dataclass(frozen=True)
class Verdict:
    latency: float  # geometric mean over workloads in ms; inf when not passed
    broken: bool


def verdict(a: AttemptFeedback) -> Verdict:
    broken = any(w.status in BROKEN for w in a.workloads)
    lats = [w.latency_ms for w in a.workloads]
    if not a.passed:
        return Verdict(math.inf, broken)
    if any(x is None or x <= 0 for x in lats):
        return Verdict(math.nan, broken)  # passed without a latency (a CPU run): comparable to nothing
    return Verdict(math.exp(sum(math.log(x) for x in lats) / len(lats)), broken)  # type: ignore[arg-type]


def _steps(options: Sequence[Option]) -> dict[tuple[str, str], list[Any]]:
    """Per (group, parameter): its values in grid order (numbers ascending, others as first planned)."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for o in options:
        for k, v in o.params.items():
            vals = seen.setdefault((o.group, k), [])
            if v not in vals:
                vals.append(v)
    for key, vals in seen.items():
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            vals.sort()
    return seen


def neighbours(a: Option, b: Option, steps: Mapping[tuple[str, str], list[Any]]) -> bool:
    if a.group != b.group or a.params.keys() != b.params.keys():
        return False
    diff = [k for k in a.params if a.params[k] != b.params[k]]
    if len(diff) != 1:
        return False
    vals = steps[(a.group, diff[0])]
    return abs(vals.index(a.params[diff[0]]) - vals.index(b.params[diff[0]])) == 1


@dataclass(frozen=True)
class SearchPolicy:
    drop_after: int = 3
    drop_margin: float = 1.5
    reference_early: bool = True  # step (2) of the module's order

    def next(
        self,
        options: Sequence[Option],
        proposed: set[str],
        verdicts: Mapping[str, Verdict],
        unavailable: frozenset[str] | set[str] = frozenset(),
        priors: Priors | None = None,
    ) -> Option | None:
        options = [o for o in options if o.name not in unavailable]
        judged = [(o, verdicts[o.name]) for o in options if o.name in verdicts]
        by_group: dict[str, list[Verdict]] = {}
        for o, v in judged:
            by_group.setdefault(o.group, []).append(v)
        skip = {g for g, vs in by_group.items() if any(v.broken for v in vs) and all(v.latency == math.inf for v in vs)}
        best = {g: min((v.latency for v in vs if not math.isnan(v.latency)), default=math.inf) for g, vs in by_group.items()}
        for g, vs in by_group.items():
            others = min((b for h, b in best.items() if h != g), default=math.inf)
            if len(vs) >= self.drop_after and others < math.inf and best[g] > self.drop_margin * others:
                skip.add(g)
        open_ = [o for o in options if o.name not in proposed and o.name not in verdicts and o.group not in skip]
        passed = any(v.latency < math.inf or math.isnan(v.latency) for _, v in judged)
        pending = any(o.floor and o.name in proposed and o.name not in verdicts for o in options)
        if not passed and not pending:
            floor = next((o for o in open_ if o.floor), None)
            if floor is not None:
                return floor
        open_ = [o for o in open_ if not o.floor]  # passed: none is needed; pending: one sure pass at a time
        if not open_:
            return None
        touched_names = {o.name for o in options if o.name in proposed or o.name in verdicts}
        touched = {o.group for o in options if o.name in touched_names}
        untried = [o for o in open_ if o.group not in touched]
        # reference-derived groups planned ahead of every template (the CPU's sure pass) keep their place
        lead = next((i for i, o in enumerate(options) if not o.group.startswith(REFERENCE_PREFIX)), len(options))
        ahead = {o.name for o in options[:lead]}
        template = next((o for o in untried if o.name in ahead or not o.group.startswith(REFERENCE_PREFIX)), None)
        if template is not None and priors and template.name not in ahead:
            picked = priors.pick([o for o in untried if not o.group.startswith(REFERENCE_PREFIX)])
            template = next(o for o in untried if picked is not None and o.name == picked.name)
        if template is not None:
            return template
        # a floor that is no bar (eager's numerics, launch cost cut) does not stand for the reference's best bet
        references = [o for o in options if o.group.startswith(REFERENCE_PREFIX) and (o.bar or not o.floor)]
        if self.reference_early and not any(o.name in touched_names for o in references):
            first_ref = next((o for o in references if o in open_), None)
            if first_ref is not None:
                return first_ref
        steps = _steps(options)
        leaders: dict[str, tuple[float, int, Option]] = {}
        for i, (o, v) in enumerate(judged):
            if v.latency < math.inf and (o.group not in leaders or v.latency < leaders[o.group][0]):
                leaders[o.group] = (v.latency, i, o)
        for _, _, won in sorted(leaders.values(), key=lambda t: t[:2]):
            if won.group in skip:
                continue
            for o in open_:
                if neighbours(won, o, steps):
                    return o
        return untried[0] if untried else open_[0]
