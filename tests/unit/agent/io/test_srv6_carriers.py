"""SRv6 mode on the sender: each datagram's carrier lists the switches of the path its EV
names; answers travel the path they answer backwards; a peer off the topology gets none."""

from __future__ import annotations

from collections import Counter
from ipaddress import IPv6Address, ip_address

import pytest

from agent.io.srv6_carriers import Srv6Carriers, is_answer
from agent.io.structured_evs import StructuredEvs
from topologies import Topology, load_topology
from topologies.paths import path_table, usid_block
from wire import srv6
from wire.constants import Opcode, RoceOpcode


def _v6(topology: Topology, host: str, plane: int = 0) -> bytes:
    (nic,) = [nic for nic in topology.host(host).nics if nic.plane == plane]
    return nic.ipv6.ip.packed


def _switch_names(topology: Topology, carrier: bytes) -> tuple[str, ...]:
    """The switches a carrier sends a packet through, read back from its uSIDs."""
    by_usid = {switch.device_id: switch.name for switch in topology.switches}
    decoded = srv6.parse_carrier(IPv6Address(carrier))
    return tuple(by_usid[usid] for usid in decoded.usids)


def test_each_structured_ev_leaves_in_the_carrier_of_the_path_it_names() -> None:
    topology = load_topology("leaf-spine")
    h1, h3 = _v6(topology, "h1"), _v6(topology, "h3")
    evs = StructuredEvs(topology, [h1], seed=1).evs_for([h3], 64)
    assert evs is not None
    carriers = Srv6Carriers(topology)
    table = path_table(topology)
    spines: Counter[str] = Counter()
    for _, ev in evs:
        carrier = carriers.carrier(h1, h3, ev, answer=False)
        assert carrier is not None
        (named,) = [p for p in table.between("l1", "l2") if p.structured_ev(table.layout, ev) == ev]
        assert _switch_names(topology, carrier) == named.switches
        assert IPv6Address(carrier) in usid_block(0)
        spines[named.switches[1]] += 1
    assert spines == {"s1": 16, "s2": 16, "s3": 16, "s4": 16}


def test_an_answer_takes_the_reverse_of_the_path_it_answers() -> None:
    topology = load_topology("fat-tree")
    nics = [nic for _, nic in topology.nics()]
    sender, receiver = nics[0], nics[-1]
    evs = StructuredEvs(topology, [sender.ipv6.ip.packed], seed=2).evs_for(
        [receiver.ipv6.ip.packed], 32
    )
    assert evs is not None
    carriers = Srv6Carriers(topology)
    seen = set()
    for _, ev in evs:
        forward = carriers.carrier(sender.ipv6.ip.packed, receiver.ipv6.ip.packed, ev, False)
        answer = carriers.carrier(receiver.ipv6.ip.packed, sender.ipv6.ip.packed, ev, True)
        assert forward is not None and answer is not None
        there = _switch_names(topology, forward)
        assert _switch_names(topology, answer) == tuple(reversed(there))
        seen.add(there)
    assert len(seen) == len(path_table(topology).between(sender.switch, receiver.switch)) > 1


def test_any_ev_names_a_path_as_a_structured_switch_would_read_it() -> None:
    """Field value v takes uplink v mod n: an EV from outside the chooser (a RoCE QP's fixed
    source port) still has a path, the one the structured tables would give it."""
    topology = load_topology("leaf-spine")
    carriers = Srv6Carriers(topology)
    h1, h2 = _v6(topology, "h1"), _v6(topology, "h3")
    for ev in (0xC0000000, 0xC0010000, 0xFFFF0000, 0xD0030000):
        carrier = carriers.carrier(h1, h2, ev, answer=False)
        assert carrier is not None
        spine = _switch_names(topology, carrier)[1]
        assert spine == f"s{((ev >> 16) & 0b11) + 1}"


def test_a_peer_off_the_topology_or_on_another_plane_has_no_carrier() -> None:
    topology = load_topology("two-plane")
    carriers = Srv6Carriers(topology)
    h1 = _v6(topology, "h1", 0)
    assert carriers.carrier(h1, ip_address("2001:db8::1").packed, 0xC0000000, False) is None
    assert carriers.carrier(h1, _v6(topology, "h3", 1), 0xC0000000, False) is None
    assert carriers.carrier(h1, _v6(topology, "h3", 0), 0xC0000000, False) is not None


def test_local_addresses_must_be_ipv6_hosts_of_the_topology() -> None:
    topology = load_topology("leaf-spine")
    carriers = Srv6Carriers(topology)
    carriers.check_local([_v6(topology, "h1")])
    ipv4 = topology.host("h1").nics[0].ipv4.ip.packed
    with pytest.raises(ValueError, match="not an IPv6 host address"):
        carriers.check_local([ipv4])


@pytest.mark.parametrize(
    ("opcode", "answer"),
    [
        (Opcode.WRITE_ONLY, False),
        (Opcode.WRITE_FIRST, False),
        (Opcode.RELIABILITY_PROBE, False),
        (Opcode.EP_REQUEST, False),
        (Opcode.ACK, True),
        (Opcode.SACK, True),
        (Opcode.NACK, True),
        (Opcode.EP_RESPONSE, True),
        (RoceOpcode.RC_RDMA_WRITE_ONLY, False),
        (RoceOpcode.RC_ACKNOWLEDGE, False),  # on the responder's own port: a path of its own
        (RoceOpcode.CNP, False),
    ],
)
def test_answers_are_told_by_their_opcode(opcode: int, answer: bool) -> None:
    assert is_answer(bytes([opcode]) + bytes(11)) is answer


def test_an_empty_payload_is_no_answer() -> None:
    assert is_answer(b"") is False
