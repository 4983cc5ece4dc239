"""Fixtures for the Mininet bring-up tests.

Tests marked ``mininet`` need root and Mininet, and run once per switch target: ``bmv2``
needs ``simple_switch_grpc`` (and for forwarding the compiled program and
``simple_switch_CLI``), ``linux`` needs ``tc`` (and for forwarding a controller that programs
kernel switches). Elsewhere they skip with one line saying what is missing. A network is
brought up once per test module and target (six BMv2s take a while on a small machine; two at
once would share service ports) and every test that changes it (cut, restart, queue) puts it
back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.mininet.environment import (
    TARGETS,
    TINY_TOPOLOGY,
    bring_up_skip_reason,
    forwarding_skip_reason,
)
from topologies import Topology, load_topology, load_topology_text


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """Each switch target in turn."""
    return str(request.param)


@pytest.fixture
def needs_bring_up(target: str) -> None:
    """Skip unless a network can be brought up on ``target``."""
    reason = bring_up_skip_reason(target)
    if reason:
        pytest.skip(reason)


@pytest.fixture
def tiny_topology() -> Topology:
    """Two leaves, one spine, one host per leaf, on service ports of its own."""
    return load_topology_text(TINY_TOPOLOGY, source="tiny")


@pytest.fixture
def tiny_topology_file(tmp_path: Path) -> Path:
    """The tiny topology as a file, for the command-line tests."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_TOPOLOGY, encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=TARGETS)
def preset_network(request: pytest.FixtureRequest) -> Iterator[object]:
    """The preset named by the module's ``PRESET`` running in Mininet on each target in turn
    (unprogrammed: see ``fabrics.programmed_fabric``)."""
    target = str(request.param)
    # BMv2 runs are skipped as they always were when forwarding cannot work; a kernel-switch
    # run comes up for the bring-up checks even before its controller can program it.
    reason = forwarding_skip_reason(target) if target == "bmv2" else bring_up_skip_reason(target)
    if reason:
        pytest.skip(reason)
    from testbed.mininet import running_network

    with running_network(load_topology(request.module.PRESET), target=target) as network:
        yield network
