"""A fabric's totals are its links' counters added up, every counter of them."""

from __future__ import annotations

from agent.sim.link import LinkCounters

NAMES = (
    "offered",
    "data_offered",
    "delivered",
    "dropped_down",
    "dropped_overflow",
    "lost",
    "trimmed",
    "ecn_marked",
    "reordered",
    "duplicated",
)


def test_adding_counters_sums_each_one_of_them():
    one = LinkCounters()
    for value, name in enumerate(NAMES, start=1):
        setattr(one, name, value)
    total = LinkCounters()
    total.add(one)
    total.add(one)
    assert {name: getattr(total, name) for name in NAMES} == {
        name: 2 * value for value, name in enumerate(NAMES, start=1)
    }


def test_the_names_above_are_every_counter_a_link_keeps():
    slots = getattr(LinkCounters, "__slots__", None)  # absent from the compiled class
    counters = LinkCounters()
    if slots is not None:
        assert set(slots) == set(NAMES)
    assert all(getattr(counters, name) == 0 for name in NAMES)
