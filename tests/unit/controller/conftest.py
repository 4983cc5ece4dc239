"""Fixtures for the controller tests: the shipped topologies, a way to name their links, and a
fake clock and event sink for the running controller (the fakes live in fakes.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.unit.controller.fakes import EventSink, FakeClock
from topologies import LinkId, Topology, load_topology


@pytest.fixture(scope="session")
def leaf_spine() -> Topology:
    """2 leaves x 4 spines, 2 hosts per leaf (h1, h2 on l1 ports 1-2; h3, h4 on l2)."""
    return load_topology("leaf-spine")


@pytest.fixture(scope="session")
def fat_tree() -> Topology:
    """k=4: pod p holds edges e(2p-1), e(2p) and aggregations a(2p-1), a(2p)."""
    return load_topology("fat-tree")


@pytest.fixture(scope="session")
def two_plane() -> Topology:
    """Two planes of 2 leaves x 2 spines; every host has eth0 on plane 0, eth1 on plane 1."""
    return load_topology("two-plane")


def _link_between(topology: Topology, one: str, other: str) -> LinkId:
    (link,) = [link for link in topology.all_links if {link.a.node, link.b.node} == {one, other}]
    return link.id


@pytest.fixture
def link_between() -> Callable[[Topology, str, str], LinkId]:
    """The id of the one link joining two named nodes (switches, or a host and its switch)."""
    return _link_between


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink(clock: FakeClock) -> EventSink:
    return EventSink(clock)
