"""Which address a transfer's side channel uses: one on a plane whose NIC is up at both ends
(the agent opens its side channel over one address; a cut NIC must not make it unreachable)."""

from __future__ import annotations

from pathlib import Path

from testbed.agents import HostAgents
from topologies import load_topology


def test_the_side_channel_avoids_a_plane_whose_nic_is_cut_at_either_end() -> None:
    topology = load_topology("two-plane")
    agents = HostAgents(topology, Path("/nonexistent"), "mn0000")
    h1, h3 = topology.host("h1"), topology.host("h3")
    assert agents.address_of("h3", "h1") == "10.0.2.1"  # plane 0 first
    assert agents.address_of("h3", "h1", {h1.link(h1.nics[0]).id}) == "10.1.2.1"
    assert agents.address_of("h3", "h1", {h3.link(h3.nics[0]).id}) == "10.1.2.1"
    every_plane = {h1.link(nic).id for nic in h1.nics}
    assert agents.address_of("h3", "h1", every_plane) == "10.0.2.1"  # fails clearly
