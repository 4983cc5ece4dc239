"""The SRv6 sender: the datagram RawSender would send, behind an outer IPv6 header to its
path's carrier, which copies the inner traffic class and flow label; no carrier, no wrapper."""

from __future__ import annotations

from ipaddress import IPv6Address

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from agent.core.datagram import IpContext, OutgoingDatagram
from agent.io.srv6_carriers import Srv6Carriers
from agent.io.srv6_sender import Srv6Sender
from topologies import load_topology
from wire import srv6
from wire.constants import Opcode


class _Capture:
    """Stands in for the raw socket's owner: what would have been sent, and to where."""

    def __init__(self) -> None:
        self.packets: list[tuple[bytes, bytes]] = []
        self.plain: list[OutgoingDatagram] = []
        self.sent = 0
        self.send_errors: dict[str, int] = {}

    def send_packet(self, parts, destination, datagram) -> bool:
        self.packets.append((b"".join(parts), destination))
        self.sent += 1
        return True

    def send(self, datagram) -> bool:
        self.plain.append(datagram)
        self.sent += 1
        return True


def _datagram(src: bytes, dst: bytes, opcode: int, ev: int) -> OutgoingDatagram:
    payload = bytes([opcode]) + bytes(63)
    return OutgoingDatagram(payload, IpContext(src, dst), 0, ev >> 16, ev & 0xFFFF, 26, 2)


@pytest.fixture
def leaf_spine():
    topology = load_topology("leaf-spine")
    capture = _Capture()
    sender = Srv6Sender(Srv6Carriers(topology), capture)  # type: ignore[arg-type]
    return topology, sender, capture


def test_a_data_packet_leaves_as_ipv6_in_ipv6_toward_its_carrier(leaf_spine) -> None:
    topology, sender, capture = leaf_spine
    h1 = topology.host("h1").nics[0].ipv6.ip
    h3 = topology.host("h3").nics[0].ipv6.ip
    ev = 0xC0021234  # spine field 2: s3
    assert sender.send(_datagram(h1.packed, h3.packed, Opcode.WRITE_ONLY, ev))
    ((packet, destination),) = capture.packets
    outer = IPv6(packet)
    assert outer.nh == srv6.NH_IPV6 and outer.hlim == 64
    assert IPv6Address(destination) == IPv6Address(outer.dst)
    usids = srv6.parse_carrier(outer.dst).usids
    by_id = {s.device_id: s.name for s in topology.switches}
    assert [by_id[u] for u in usids] == ["l1", "s3", "l2"]
    assert outer.src == str(h1)
    assert outer.tc == (26 << 2) | 2 and outer.fl == 0x1234
    inner = outer[IPv6][1]
    assert inner.src == str(h1) and inner.dst == str(h3) and inner.tc == outer.tc
    assert inner[UDP].sport == 0xC002 and inner[UDP].dport == 4791
    assert bytes(inner[UDP].payload)[0] == Opcode.WRITE_ONLY
    assert outer.plen == len(packet) - 40
    checked = IPv6(bytes(inner))
    del checked[UDP].chksum
    assert IPv6(bytes(checked))[UDP].chksum == inner[UDP].chksum, "inner UDP checksum is right"
    assert sender.counters() == {"srv6_carriers": {"in_carrier": 1, "without_carrier": 0}}


def test_an_ack_goes_back_through_the_spine_of_the_data_it_answers(leaf_spine) -> None:
    topology, sender, capture = leaf_spine
    h1 = topology.host("h1").nics[0].ipv6.ip.packed
    h3 = topology.host("h3").nics[0].ipv6.ip.packed
    sender.send(_datagram(h3, h1, Opcode.SACK, 0xC0010000))
    ((packet, _),) = capture.packets
    by_id = {s.device_id: s.name for s in topology.switches}
    assert [by_id[u] for u in srv6.parse_carrier(IPv6(packet).dst).usids] == ["l2", "s2", "l1"]


def test_a_peer_without_carrier_gets_the_plain_datagram(leaf_spine) -> None:
    topology, sender, capture = leaf_spine
    h1 = topology.host("h1").nics[0].ipv6.ip.packed
    stranger = IPv6Address("2001:db8::7").packed
    sender.send(_datagram(h1, stranger, Opcode.WRITE_ONLY, 0xC0000000))
    assert capture.packets == [] and len(capture.plain) == 1
    assert sender.counters()["srv6_carriers"] == {"in_carrier": 0, "without_carrier": 1}


def test_send_many_sends_each_in_order(leaf_spine) -> None:
    topology, sender, capture = leaf_spine
    h1 = topology.host("h1").nics[0].ipv6.ip.packed
    h3 = topology.host("h3").nics[0].ipv6.ip.packed
    batch = [_datagram(h1, h3, Opcode.WRITE_MIDDLE, 0xC0000000 | (i << 16)) for i in range(4)]
    assert sender.send_many(batch) == 4
    spines = [srv6.parse_carrier(IPv6(p).dst).usids[1] for p, _ in capture.packets]
    assert len(set(spines)) == 4
    assert sender.make_slots(lambda slots: None) is None


def test_ipv4_planes_are_refused() -> None:
    sender = Srv6Sender(Srv6Carriers(load_topology("leaf-spine")))
    with pytest.raises(ValueError, match="over IPv6"):
        sender.open(ipv4=True, ipv6=False)
