"""Fixtures for the controller tests against real BMv2 switches (Mininet bring-up).

They need root, Mininet, simple_switch_grpc, simple_switch_CLI and the compiled program, and
skip with one line naming what is missing. One two-leaf network runs for the whole module; each
test starts its own controller processes and leaves the links as it found them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bmv2.controller.harness import PAIR_TOPOLOGY, ControllerProcess
from tests.e2e.mininet.environment import forwarding_skip_reason
from topologies import Topology, load_topology_text


@pytest.fixture(scope="session")
def pair_topology() -> Topology:
    return load_topology_text(PAIR_TOPOLOGY, source="pair")


@pytest.fixture(scope="session")
def pair_topology_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("topology") / "pair.yaml"
    path.write_text(PAIR_TOPOLOGY, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def pair_network(pair_topology: Topology) -> Iterator[object]:
    """The pair topology running in Mininet for the whole session (switches start empty)."""
    reason = forwarding_skip_reason()
    if reason:
        pytest.skip(reason)
    from testbed.mininet import running_network

    with running_network(pair_topology) as network:
        yield network


@pytest.fixture
def controllers(tmp_path: Path, pair_topology_file: Path) -> Iterator[object]:
    """A factory of controller processes; every one is killed when the test ends."""
    started: list[ControllerProcess] = []

    def start(name: str = "ctl", election_id: int = 10, *extra: str) -> ControllerProcess:
        process = ControllerProcess(pair_topology_file, tmp_path, name, election_id, extra)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
