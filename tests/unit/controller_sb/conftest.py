"""Fixtures for the southbound and running-controller tests (the fakes live in fakes.py)."""

from __future__ import annotations

import pytest

from tests.unit.controller_sb.fakes import EventSink, FakeClock
from topologies import Topology, load_topology


@pytest.fixture(scope="session")
def leaf_spine() -> Topology:
    """2 leaves x 4 spines; l1 ports 3-6 go to s1-s4 port 1, l2 ports 3-6 to s1-s4 port 2."""
    return load_topology("leaf-spine")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink(clock: FakeClock) -> EventSink:
    return EventSink(clock)
