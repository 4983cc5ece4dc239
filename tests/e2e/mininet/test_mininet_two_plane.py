"""Multi-plane hosts: on the two-plane preset every host has one NIC per plane, and each NIC
reaches the same plane's NIC of every other host over IPv4 and IPv6, through its own plane, on
each switch target."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import permutations

import pytest

from tests.e2e.mininet.fabrics import programmed_fabric
from tests.e2e.mininet.machine_state import eventually, netns_exec
from tests.e2e.mininet.pings import PingResult, finish_ping, start_ping

pytestmark = pytest.mark.mininet
PRESET = "two-plane"
#: How long the reachability check retries (a loaded machine loses an echo now and then).
REACH_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def network(preset_network) -> Iterator[object]:
    with programmed_fabric(preset_network, PRESET):
        yield preset_network


def test_traffic_to_a_plane_leaves_through_that_planes_nic(network):
    for source, target in permutations([host.name for host in network.topology.hosts], 2):
        for nic in network.topology.host(target).nics:
            for address in (nic.ipv4.ip, nic.ipv6.ip):
                route = netns_exec(network.host(source).netns, "ip", "route", "get", str(address))
                assert f"dev {nic.name} " in route, route


def test_every_nic_reaches_every_other_hosts_nic_on_its_plane(network):
    results = eventually(
        lambda: _ping_every_nic(network),
        lambda rs: all(r.lossless for r in rs),
        timeout=REACH_TIMEOUT_S,
    )
    assert len(results) == 4 * 3 * 2 * 2
    lossy = [str(result) for result in results if not result.lossless]
    assert not lossy, f"lost pings: {lossy}"


def _ping_every_nic(network) -> list[PingResult]:
    running = []
    for source, target in permutations([host.name for host in network.topology.hosts], 2):
        for nic in network.topology.host(target).nics:
            for address in (str(nic.ipv4.ip), str(nic.ipv6.ip)):
                proc = start_ping(network, source, address, count=2, interval=0.2)
                running.append((proc, source, target, address))
    return [finish_ping(proc, s, t, a, 2) for proc, s, t, a in running]
