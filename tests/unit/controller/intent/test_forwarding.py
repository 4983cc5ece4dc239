"""Whatever links are down, following the intent's next hops delivers or cleanly refuses.

A property over random failure sets: from every switch, every member of the group chosen for a
destination leads over an up link, toward the destination, without loops, and a destination
has routes exactly when the fabric still connects to it.
"""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.intent import compute_intent
from topologies import Topology, fabric_graph, load_topology


def _walk(topology, intent, switch, nic, down, hops_left) -> None:
    """Follow every member from ``switch`` toward ``nic``; fail on a loop or a dead end."""
    assert hops_left > 0, f"loop toward {nic.ipv4} at {switch}"
    group = intent.switch(switch).lookup(nic.ipv4.ip)
    assert group is not None, f"{switch} has no route to reachable {nic.ipv4}"
    assert group == intent.switch(switch).lookup(nic.ipv6.ip)
    for member in group.members:
        link = topology.link_at(switch, member.egress_port)
        assert link.id not in down, f"{switch} hashes onto down link {link.id}"
        far = link.far_end(switch)
        if topology.is_host(far.node):
            assert (far.node, far.port) == _owner(topology, nic)
        else:
            _walk(topology, intent, far.node, nic, down, hops_left - 1)


def _owner(topology: Topology, wanted) -> tuple[str, int]:
    for host, nic in topology.nics():
        if nic == wanted:
            return host.name, nic.index
    raise KeyError(wanted)


def _check(topology: Topology, down: frozenset) -> None:
    intent = compute_intent(topology, down)
    graph = fabric_graph(topology, down)
    for host, nic in topology.nics():
        host_link_up = host.link(nic).id not in down
        for switch in topology.switches:
            if switch.plane != nic.plane:
                continue
            reachable = host_link_up and nx.has_path(graph, switch.name, nic.switch)
            if reachable:
                _walk(topology, intent, switch.name, nic, down, hops_left=len(topology.switches))
            else:
                group = intent.switch(switch.name).lookup(nic.ipv4.ip)
                # Only the remote edge's prefix may still lead toward a switch whose NIC is down.
                if group is not None:
                    assert not host_link_up
                    assert switch.name != nic.switch


@pytest.mark.parametrize("name", ["leaf-spine-4x4", "fat-tree", "two-plane"])
def test_with_every_link_up_every_switch_reaches_every_nic_of_its_plane(name):
    _check(load_topology(name), frozenset())


@settings(max_examples=20, deadline=None)
@given(data=st.data(), name=st.sampled_from(["leaf-spine-4x4", "fat-tree", "two-plane"]))
def test_after_any_set_of_failures_forwarding_has_no_loops_and_no_dead_links(data, name):
    topology = load_topology(name)
    candidates = sorted(link.id for link in topology.all_links)
    down = data.draw(st.frozensets(st.sampled_from(candidates), max_size=6))
    _check(topology, down)
