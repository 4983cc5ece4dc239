"""``SendSlots``: data packets the core writes straight into the runtime's send buffer, behind
the IPv4 and UDP header the raw sender writes in front of them, are byte for byte the IP
packets the one-datagram-at-a-time path leads to (the raw sender's IPv4 and UDP header in front
of the encoder's UDP payload), in the same order, with the same accounting; so the runtime may
take either path."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core import ConnectionSpec, Endpoint, MrcConfig, OutgoingDatagram
from agent.core.data_encoder import DataPacketEncoder
from agent.core.datagram import IpContext
from agent.core.send_slots import SendSlots
from agent.io.raw_sender import (
    DEFAULT_TTL,
    IPV4_UDP_HEADER_LEN,
    ipv4_udp_header,
    pack_ipv4_udp_header,
)
from tests.unit.agent.core.strategies import u16, u24, u32
from wire.constants import DATA_OPCODES, IMM_OPCODES, ROCEV2_UDP_PORT

A, B, C = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), bytes([10, 1, 0, 2])
SLOT = 1200


def _slots(
    capacity: int, sink: object = None, slot_size: int = SLOT
) -> tuple[SendSlots, list[bytes]]:
    """Slots over plain bytearrays, and what the default sink keeps: every flushed packet."""
    kept: list[bytes] = []

    def keep(slots: SendSlots) -> None:
        # The header the raw sender's ``send_slots`` writes into each slot's header room.
        for slot in range(slots.count):
            e = slots.envelopes[slot]
            start = slot * slots.slot_size
            pack_ipv4_udp_header(
                slots.buffer, start, e.ip, e.src_port, e.dst_port, e.dscp, e.ecn, e.length,
                DEFAULT_TTL,
            )  # fmt: skip
            kept.append(bytes(slots.buffer[start : start + IPV4_UDP_HEADER_LEN + e.length]))
        slots.clear()

    slots = SendSlots(
        memoryview(bytearray(capacity * slot_size)), slot_size, capacity, IPV4_UDP_HEADER_LEN,
        sink if sink is not None else keep,  # type: ignore[arg-type]
    )  # fmt: skip
    return slots, kept


def _wire(datagram: OutgoingDatagram) -> bytes:
    """The IP packet the raw sender sends for ``datagram`` (IPv4)."""
    return ipv4_udp_header(datagram) + datagram.payload


@settings(max_examples=150, deadline=None)
@given(
    opcode=st.sampled_from(sorted(int(op) for op in DATA_OPCODES)),
    dest_qp=u24,
    psn=u24,
    msn=u16,
    va=st.integers(0, (1 << 64) - 1),
    rkey=u32,
    payload=st.binary(max_size=1100),
    immediate=u32,
    ack_req=st.booleans(),
    retransmit=st.booleans(),
    src_port=u16,
    dscp=st.integers(0, 63),
    ecn=st.integers(0, 3),
    offset=st.integers(0, 3),
)
def test_encode_into_writes_the_raw_senders_ip_packet(
    opcode: int, dest_qp: int, psn: int, msn: int, va: int, rkey: int, payload: bytes,
    immediate: int, ack_req: bool, retransmit: bool, src_port: int, dscp: int, ecn: int,
    offset: int,
) -> None:  # fmt: skip
    ip = IpContext(src=A, dst=B)
    imm = immediate if opcode in IMM_OPCODES else None
    args = (opcode, psn, msn, 7, va, rkey, 1 << 20, memoryview(payload), imm, 1234, ack_req,
            retransmit, src_port)  # fmt: skip
    expected = _wire(
        OutgoingDatagram(DataPacketEncoder(ip, dest_qp).encode(*args), ip, 0, src_port, 0,
                         dscp, ecn)
    )  # fmt: skip
    buffer = bytearray(b"\xaa" * (2000 + offset * 1300))
    start = offset * 1300
    # The core writes the MRC datagram behind the header room, the raw sender the header.
    length = DataPacketEncoder(ip, dest_qp).encode_into(
        memoryview(buffer), start + IPV4_UDP_HEADER_LEN, *args
    )
    pack_ipv4_udp_header(
        buffer, start, ip, src_port, ROCEV2_UDP_PORT, dscp, ecn, length, DEFAULT_TTL
    )
    length += IPV4_UDP_HEADER_LEN
    assert bytes(buffer[start : start + length]) == expected
    assert set(buffer[:start]) <= {0xAA} and set(buffer[start + length :]) <= {0xAA}


def _endpoint_pair(planes: tuple[bytes, ...]) -> tuple[Endpoint, int, int]:
    config = MrcConfig(ev_set_size=16)
    sender = Endpoint([bytes([10, p, 0, 1]) for p in range(len(planes))], config, seed=3)
    receiver = Endpoint(list(planes), config, seed=4)
    region = receiver.register_memory(bytearray(1 << 18))
    sender.connect(ConnectionSpec(local_qp=0x10, remote_qp=0x20, remote_addresses=planes))
    return sender, region.rkey, region.va


def test_slots_hold_the_same_packets_in_the_same_order_as_the_datagram_path() -> None:
    data = os.urandom(50 * 1024 + 77)
    plain, rkey, va = _endpoint_pair((B, C))
    slotted, rkey_b, va_b = _endpoint_pair((B, C))
    assert (rkey, va) == (rkey_b, va_b)
    for endpoint in (plain, slotted):
        endpoint.post_write(0x10, data[:3000], va, rkey, immediate=None)
        endpoint.post_write(0x10, data[3000:], va + 3000, rkey, immediate=0xABCD)
    expected = [_wire(d) for d in plain.datagrams_to_send(0.0)]
    slots, kept = _slots(capacity=7)  # smaller than the burst: flushed through the sink mid-call
    rest = slotted.datagrams_to_send(0.0, slots)
    slots.flush()
    assert rest == []  # only data was due, all of it on IPv4 paths
    assert kept == expected
    assert len(expected) > 7 * 3
    assert slotted.stats.datagrams_sent == plain.stats.datagrams_sent == len(expected)
    plain_stats, slotted_stats = plain.connection_stats(0x10), slotted.connection_stats(0x10)
    assert slotted_stats.data_packets_sent == plain_stats.data_packets_sent


def test_a_slot_read_back_as_a_datagram_is_the_datagram_the_plain_path_makes() -> None:
    data = os.urandom(5 * 1024)
    plain, rkey, va = _endpoint_pair((B, C))
    slotted, _, _ = _endpoint_pair((B, C))
    for endpoint in (plain, slotted):
        endpoint.post_write(0x10, data, va, rkey, immediate=5)
    expected = plain.datagrams_to_send(0.0)
    taken: list[OutgoingDatagram] = []

    def take(slots: SendSlots) -> None:
        taken.extend(slots.datagram(slot) for slot in range(slots.count))
        slots.clear()

    slots, _ = _slots(capacity=2, sink=take)
    slotted.datagrams_to_send(0.0, slots)
    slots.flush()
    assert taken == expected


def test_packets_that_do_not_fit_a_slot_and_ipv6_paths_stay_datagrams() -> None:
    data = os.urandom(4 * 1024)
    plain, rkey, va = _endpoint_pair((B,))
    small, _, _ = _endpoint_pair((B,))
    for endpoint in (plain, small):
        endpoint.post_write(0x10, data, va, rkey)
    expected = plain.datagrams_to_send(0.0)
    slots, _ = _slots(capacity=4, slot_size=IPV4_UDP_HEADER_LEN + 500)
    assert small.datagrams_to_send(0.0, slots) == expected
    assert slots.count == 0 and slots.written == 0

    v6 = bytes(15) + b"\x02"
    config = MrcConfig(ev_set_size=16)
    sender = Endpoint([bytes(15) + b"\x01"], config, seed=3)
    sender.connect(ConnectionSpec(local_qp=0x10, remote_qp=0x20, remote_addresses=(v6,)))
    sender.post_write(0x10, data, 0, 1)
    slots, _ = _slots(capacity=4)
    out = sender.datagrams_to_send(0.0, slots)
    assert len(out) == 4 and slots.count == 0


def _control_datagram(dst: bytes, payload: bytes, src_port: int = 0xC123) -> OutgoingDatagram:
    context = IpContext(src=A if len(dst) == 4 else bytes(16), dst=dst)
    return OutgoingDatagram(payload, context, 0, src_port, 0, 46, 0)


def test_an_appended_datagram_is_the_ip_packet_the_plain_path_sends() -> None:
    slots, kept = _slots(4)
    datagram = _control_datagram(B, os.urandom(36))
    assert slots.append(datagram)
    planes = [e.plane for e in slots.envelopes[: slots.count]]
    assert (slots.count, slots.written, planes) == (1, 0, [0])
    assert slots.datagram(0) == datagram
    slots.flush()
    assert kept == [_wire(datagram)]


def test_appending_to_full_slots_flushes_them_first_and_keeps_the_order() -> None:
    slots, kept = _slots(2)
    datagrams = [_control_datagram(B, bytes([n]) * 30) for n in range(5)]
    for datagram in datagrams:
        assert slots.append(datagram)
    slots.flush()
    assert kept == [_wire(d) for d in datagrams]


def test_an_ipv6_or_oversized_datagram_is_not_appended_and_nothing_is_written() -> None:
    slots, kept = _slots(2, slot_size=IPV4_UDP_HEADER_LEN + 40)
    assert not slots.append(_control_datagram(bytes(15) + b"\x01", bytes(20)))
    assert not slots.append(_control_datagram(B, bytes(41)))
    assert slots.append(_control_datagram(B, bytes(40)))
    assert slots.count == 1 and kept == []
