"""A simulated switch forwards as the controller's intent says: longest-prefix match to a
group, a hash of addresses and EV over the group's live members, dead ports skipped at once,
and a packet with nowhere to go dropped and counted."""

from __future__ import annotations

from collections import Counter

from agent.core.datagram import IpContext, OutgoingDatagram
from agent.sim.packet import SimPacket
from controller.intent import compute_intent
from simulation import SimFabric
from topologies import load_topology
from wire.constants import ROCEV2_UDP_PORT


def _packet(src: bytes, dst: bytes, ev_port: int) -> SimPacket:
    return SimPacket(
        OutgoingDatagram(
            payload=b"x" * 64,
            ip=IpContext(src, dst),
            plane=0,
            src_port=ev_port,
            flow_label=0,
            dst_port=ROCEV2_UDP_PORT,
            dscp=0,
            ecn=0,
        )
    )


def _address(topology, host: str) -> bytes:
    return topology.host(host).nics[0].ipv4.ip.packed


def test_a_leaf_hashes_remote_destinations_over_every_spine_and_local_ones_to_their_port():
    topology = load_topology("leaf-spine")
    fabric = SimFabric(topology)
    leaf = fabric.switches["l1"]
    h1, h2, h3 = (_address(topology, name) for name in ("h1", "h2", "h3"))
    intent = compute_intent(topology).switch("l1")
    assert leaf.ports_toward(h3) == intent.lookup(topology.host("h3").nics[0].ipv4.ip).ports
    assert leaf.ports_toward(h2) == (2,)
    chosen = Counter(leaf.egress_port(_packet(h1, h3, 0xC000 + ev)) for ev in range(4000))
    assert set(chosen) == {3, 4, 5, 6}
    assert min(chosen.values()) > 4000 / 4 * 0.8  # spread evenly, as ECMP should


def test_each_switch_hashes_with_its_own_seed():
    topology = load_topology("leaf-spine-4x4")
    fabric = SimFabric(topology)
    src, dst = _address(topology, "h1"), _address(topology, "h16")
    packets = [_packet(src, dst, 0xC000 + ev) for ev in range(64)]
    choices = {
        name: [fabric.switches[name].egress_port(packet) for packet in packets]
        for name in ("l1", "l2")
    }
    ranks = {name: [sorted(set(c)).index(port) for port in c] for name, c in choices.items()}
    assert ranks["l1"] != ranks["l2"]


def test_a_port_without_carrier_is_skipped_at_once_and_taken_again_when_it_returns():
    topology = load_topology("leaf-spine")
    leaf = SimFabric(topology).switches["l1"]
    h3 = _address(topology, "h3")
    leaf.set_carrier(3, False)
    assert leaf.ports_toward(h3) == (4, 5, 6)
    leaf.set_carrier(3, True)
    assert leaf.ports_toward(h3) == (3, 4, 5, 6)


def test_a_packet_with_no_live_next_hop_or_no_route_is_dropped_and_counted():
    topology = load_topology("leaf-spine")
    leaf = SimFabric(topology).switches["l1"]
    h1, h3 = _address(topology, "h1"), _address(topology, "h3")
    for port in (3, 4, 5, 6):
        leaf.set_carrier(port, False)
    leaf.receive(_packet(h1, h3, 0xC000))
    leaf.receive(_packet(h1, bytes([192, 0, 2, 1]), 0xC000))
    assert leaf.no_route == 2 and leaf.forwarded == 0
