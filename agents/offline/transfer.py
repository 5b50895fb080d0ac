"""Which variant to plan first, from what kin problems measured (``solforge/planning/transfer.py`` picks the kin).

A template variant is named ``<problem>__<family>_<language>_<params>``; its variant key, the part after
``__``, names the same template point on every problem the template binds to. For each kin problem, the
variants of one planned group that were measured there compete: the fastest passing one gets the problem's
vote (only where at least two were measured: one alone proves nothing about its parameters). Across groups,
the fastest measured variant of any planned group gives its group the vote. The search then takes untried
groups by their votes and, inside a group, the point with the most votes first; with no votes it keeps
plan order, so a point fitted by hand on one problem leads only until another point wins on kin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, TypeVar

VARIANT_SEPARATOR = "__"

# kin problem -> variant key -> geometric-mean latency in ms (None: judged and failed)
Kin = Mapping[str, Mapping[str, "float | None"]]


def variant_key(solution_name: str) -> str | None:
    """The problem-independent part of a template variant's name; None for names without one."""
    _, sep, key = solution_name.partition(VARIANT_SEPARATOR)
    return (key or None) if sep else None


class Planned(Protocol):
    """What the votes need of a planned option: its name and group."""

    @property
    def name(self) -> str: ...

    @property
    def group(self) -> str: ...


P = TypeVar("P", bound=Planned)


@dataclass
class Priors:
    point_votes: dict[str, int] = field(default_factory=dict)  # option name -> kin problems where it won its group
    group_votes: dict[str, int] = field(default_factory=dict)  # group -> kin problems where it was fastest
    contests: dict[str, int] = field(default_factory=dict)  # group -> kin problems comparing two or more of its points

    def __bool__(self) -> bool:
        return bool(self.point_votes or self.group_votes)

    def pick(self, options: Sequence[P]) -> P | None:
        """The group with the most votes (plan order on ties), and in it the point with the most votes."""
        if not options:
            return None
        groups = list(dict.fromkeys(o.group for o in options))
        group = max(groups, key=lambda g: (self.group_votes.get(g, 0), -groups.index(g)))
        members = [o for o in options if o.group == group]
        return max(members, key=lambda o: (self.point_votes.get(o.name, 0), -members.index(o)))

    def note(self, option: Planned) -> str:
        won = self.point_votes.get(option.name, 0)
        if not won:
            return ""
        return f"planned first: the fastest of its group on {won} of {self.contests.get(option.group, 0)} kin problems"


def priors(options: Sequence[Planned], kin: Kin) -> Priors:
    keyed = [(o, k) for o in options if (k := variant_key(o.name)) is not None]
    out = Priors()
    for measured in kin.values():
        fastest: dict[str, tuple[float, Planned]] = {}
        tried: dict[str, int] = {}
        for o, k in keyed:
            if k not in measured:
                continue
            tried[o.group] = tried.get(o.group, 0) + 1
            latency = measured[k]
            if latency is not None and (o.group not in fastest or latency < fastest[o.group][0]):
                fastest[o.group] = (latency, o)
        for group, (_, winner) in fastest.items():
            if tried[group] >= 2:
                out.point_votes[winner.name] = out.point_votes.get(winner.name, 0) + 1
                out.contests[group] = out.contests.get(group, 0) + 1
        if len(tried) >= 2 and fastest:
            best = min(fastest, key=lambda g: fastest[g][0])
            out.group_votes[best] = out.group_votes.get(best, 0) + 1
    return out
