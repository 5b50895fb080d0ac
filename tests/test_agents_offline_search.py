"""The offline agent's measurement-guided order, driven by synthetic judge feedback."""

from __future__ import annotations

import itertools
import math

from agents.offline.search import Option, SearchPolicy, Verdict, neighbours, _steps

GRID = {"bm": (64, 128, 32, 16), "bn": (64, 32, 128), "warps": (8, 4)}  # plan order: best guess first


def fast_latency(p) -> float:
    """A bowl with its floor at bm=32, bn=128, warps=4 (1.0 ms), far from the first planned variant."""
    return 1.0 + (math.log2(p["bm"]) - 5) ** 2 + (math.log2(p["bn"]) - 7) ** 2 + 0.5 * (p["warps"] == 8)


def options() -> list[Option]:
    slow = [Option(f"slow{x}", "slow/triton/0", {"x": x}) for x in (1, 2, 3, 4, 5)]
    fast = [Option("fast_" + "_".join(map(str, v)), "fast/triton/0", dict(zip(GRID, v)))
            for v in itertools.product(*GRID.values())]  # fmt: skip
    return slow + fast + [Option("ref", "reference/eager", {})]


def latency(o: Option) -> float:
    return 10.0 if o.group.startswith("slow") else 30.0 if o.group.startswith("ref") else fast_latency(o.params)


def drive(limit: int, reference_early: bool = True) -> list[Option]:
    opts, policy = options(), SearchPolicy(drop_after=3, drop_margin=1.5, reference_early=reference_early)
    proposed: set[str] = set()
    verdicts: dict[str, Verdict] = {}
    order = []
    while len(order) < limit and (o := policy.next(opts, proposed, verdicts)) is not None:
        assert o.name not in proposed
        proposed.add(o.name)
        verdicts[o.name] = Verdict(latency(o), False)
        order.append(o)
    return order


def test_order_climbs_to_the_fastest_neighbour_and_drops_the_slow_group():
    order = drive(limit=40)
    names = [o.name for o in order]
    assert len(set(names)) == len(names)
    steps = _steps(options())
    # every template group is measured once first (plan order), then the reference's first candidate (the
    # bar to clear), then the climb starts from the fastest
    assert names[:3] == ["slow1", "fast_64_64_8", "ref"]
    assert all(o.group.startswith("fast") for o in order[3:7])
    fast = [o for o in order if o.group.startswith("fast")]
    # after the first fast variant passes, every next fast try is a neighbour of the best fast one so far
    best = fast[0]
    for o in fast[1:]:
        if not neighbours(best, o, steps):
            break
        best = o if latency(o) < latency(best) else best
    assert best.params == {"bm": 32, "bn": 128, "warps": 4}
    climb = names.index("fast_32_128_4")
    assert climb < 15  # of 24 fast variants
    # the slow group is dropped after three tries; the eager reference is measured once
    assert sum(o.group.startswith("slow") for o in order) == 3
    assert names.count("ref") == 1
    # without the early reference the climb comes first and the reference waits for it
    late = [o.name for o in drive(limit=40, reference_early=False)]
    assert late[:2] == ["slow1", "fast_64_64_8"] and late.index("ref") > late.index("fast_32_128_4")


def test_early_reference_skips_what_the_agent_could_not_make():
    """Two reference groups after the templates, the first one unavailable (an export Inductor refused):
    the second is the bar, measured once, before any neighbour."""
    opts = options()[:6] + [Option("exported", "reference/exported", {}), Option("ref", "reference/eager", {})]
    policy = SearchPolicy()
    done = {o.name: Verdict(latency(o), False) for o in opts if o.name in ("slow1", "fast_64_64_8")}
    assert policy.next(opts, set(done), done).name == "exported"
    assert policy.next(opts, set(done), done, unavailable={"exported"}).name == "ref"
    done["ref"] = Verdict(30.0, False)
    assert not policy.next(opts, set(done), done, unavailable={"exported"}).group.startswith("reference/")


def test_broken_group_is_skipped_and_nothing_repeats():
    opts = options()
    policy = SearchPolicy()
    verdicts = {"slow1": Verdict(math.inf, True)}
    pick = policy.next(opts, {"slow1"}, verdicts)
    assert pick is not None and pick.group.startswith("fast")
    everything = {o.name for o in opts}
    assert policy.next(opts, everything, {}) is None


def test_templates_are_measured_before_tuning_and_a_leading_reference_keeps_its_place():
    opts = options()
    policy = SearchPolicy()
    # after the slow group's first variant, the fast group's first comes before any slow neighbour
    assert policy.next(opts, {"slow1"}, {"slow1": Verdict(10.0, False)}).name == "fast_64_64_8"
    # a reference planned first (the CPU's sure pass) is proposed first, and then none comes early
    lead = [Option("eager", "reference/eager", {})] + [o for o in opts if o.name != "ref"]
    assert policy.next(lead, set(), {}).name == "eager"
    done = {o.name: Verdict(latency(o), False) for o in lead if o.name in ("eager", "slow1", "fast_64_64_8")}
    assert policy.next(lead, set(done), done).group.startswith("fast")
