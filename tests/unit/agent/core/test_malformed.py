"""Malformed and hostile input: every kind is dropped and counted under its reason, and nothing
a peer can send makes the core raise."""

from __future__ import annotations

import struct
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core import DropReason, IncomingDatagram, IpContext
from agent.core.codec import encode
from agent.core.icrc import icrc_bytes
from agent.core.packets import DataPacket, Packet, SackPacket
from tests.unit.agent.core.loopback import Loopback
from tests.unit.agent.core.strategies import any_packets
from wire.constants import Opcode

SRC_PORT = 0xC123


def _context(link: Loopback, towards_b: bool = True) -> IpContext:
    if towards_b:
        return IpContext(src=link.a.local_addresses[0], dst=link.b.local_addresses[0])
    return IpContext(src=link.b.local_addresses[0], dst=link.a.local_addresses[0])


def _datagram(payload: bytes, ip: IpContext, **fields: int) -> IncomingDatagram:
    values = {"src_port": SRC_PORT, "dscp": 4, "ecn": 0}
    values.update(fields)
    return IncomingDatagram(payload=payload, ip=ip, **values)


def _send(link: Loopback, packet: Packet, towards_b: bool = True, **fields: int) -> None:
    ip = _context(link, towards_b)
    target = link.b if towards_b else link.a
    target.receive_datagram(_datagram(encode(packet, ip, SRC_PORT), ip, **fields), link.now)


def _write(link: Loopback, **overrides: int) -> DataPacket:
    fields = {
        "opcode": Opcode.WRITE_ONLY,
        "dest_qp": link.qp_b,
        "psn": 9,
        "msn": 0,
        "rqmsn": 0,
        "va": link.va,
        "rkey": link.rkey,
        "dma_length": 4,
        "payload": b"abcd",
        "tx_timestamp": 0,
    }
    fields.update(overrides)
    return DataPacket(**fields)  # type: ignore[arg-type]


def _only(link_drops: dict[DropReason, int]) -> dict[DropReason, int]:
    return {reason: count for reason, count in link_drops.items() if count}


def test_a_well_formed_write_is_accepted_by_the_helpers_used_below():
    link = Loopback.create()
    _send(link, _write(link))
    assert _only(link.b.stats.drops) == {}
    assert link.b.memory.read(link.rkey, link.va, 4) == b"abcd"


def test_truncated_headers_are_dropped_as_truncated():
    link = Loopback.create()
    ip = _context(link)
    wire = encode(_write(link), ip, SRC_PORT)
    for cut in (0, 5, 11, 20, 36):
        link.b.receive_datagram(_datagram(wire[:cut], ip), link.now)
    assert _only(link.b.stats.drops) == {DropReason.TRUNCATED: 5}


def test_an_unknown_opcode_is_dropped_as_such():
    link = Loopback.create()
    ip = _context(link)
    body = struct.pack(">BBHII", 0x64, 0, 0xFFFF, link.qp_b, 9)
    link.b.receive_datagram(_datagram(body + icrc_bytes(body, ip, SRC_PORT, 4791), ip), link.now)
    assert _only(link.b.stats.drops) == {DropReason.UNKNOWN_OPCODE: 1}


def test_a_corrupted_packet_fails_its_icrc():
    link = Loopback.create()
    ip = _context(link)
    wire = bytearray(encode(_write(link), ip, SRC_PORT))
    wire[-6] ^= 0x40
    link.b.receive_datagram(_datagram(bytes(wire), ip), link.now)
    assert _only(link.b.stats.drops) == {DropReason.BAD_ICRC: 1}
    assert link.b.memory.read(link.rkey, link.va, 4) == bytes(4)


def test_a_psn_beyond_the_receive_window_is_dropped_as_out_of_window():
    link = Loopback.create()
    window = link.b.config.max_psn_window
    _send(link, _write(link, psn=9 + window))
    _send(link, _write(link, psn=(9 - 40_000) & 0xFFFFFF))
    assert _only(link.b.stats.drops) == {DropReason.OUT_OF_WINDOW: 2}


def test_an_unknown_destination_qp_is_dropped():
    link = Loopback.create()
    _send(link, _write(link, dest_qp=link.qp_b ^ 0x1))
    assert _only(link.b.stats.drops) == {DropReason.UNKNOWN_QP: 1}


def test_a_wrong_key_and_a_write_outside_the_region_are_rejected():
    link = Loopback.create()
    _send(link, _write(link, rkey=link.rkey + 1))
    _send(link, _write(link, psn=10, msn=1, va=link.va - 2))
    assert _only(link.b.stats.drops) == {DropReason.BAD_RKEY: 1, DropReason.OUT_OF_BOUNDS: 1}
    assert link.b.connection_stats(link.qp_b).writes_rejected == 2


def test_a_payload_longer_than_its_message_is_a_bad_field():
    link = Loopback.create()
    _send(link, _write(link, dma_length=2))
    assert _only(link.b.stats.drops) == {DropReason.BAD_FIELD: 1}


def test_a_packet_from_an_address_that_is_not_the_peer_is_dropped():
    link = Loopback.create()
    stranger = IpContext(src=bytes([10, 0, 0, 99]), dst=link.b.local_addresses[0])
    wire = encode(_write(link), stranger, SRC_PORT)
    link.b.receive_datagram(_datagram(wire, stranger), link.now)
    assert _only(link.b.stats.drops) == {DropReason.WRONG_SOURCE: 1}


def test_wrong_port_and_foreign_destination_are_dropped_before_decoding():
    link = Loopback.create()
    ip = _context(link)
    wire = encode(_write(link), ip, SRC_PORT)
    link.b.receive_datagram(_datagram(wire, ip, dst_port=4792), link.now)
    elsewhere = replace(ip, dst=bytes([10, 9, 9, 9]))
    link.b.receive_datagram(_datagram(wire, elsewhere), link.now)
    assert _only(link.b.stats.drops) == {
        DropReason.WRONG_PORT: 1,
        DropReason.UNKNOWN_DESTINATION: 1,
    }


def test_a_sack_for_psns_never_sent_is_unexpected():
    link = Loopback.create()
    sack = SackPacket(
        dest_qp=link.qp_a, psn=0, cack_psn=5000, ack_psn_offset=0, entropy=0, bitmap=0
    )
    _send(link, sack, towards_b=False)
    assert _only(link.a.stats.drops) == {DropReason.UNEXPECTED: 1}


@settings(max_examples=60, deadline=None)
@given(junk=st.lists(st.binary(max_size=120), max_size=20), dscp=st.sampled_from([4, 12, 13, 46]))
def test_random_bytes_are_dropped_and_counted_never_raised(junk, dscp):
    link = Loopback.create()
    link.post(b"x" * 3000)
    ip = _context(link)
    for blob in junk:
        link.b.receive_datagram(_datagram(blob, ip, dscp=dscp), link.now)
    assert link.b.stats.total_drops == len(junk)
    link.b.handle_timer(link.now)
    link.b.datagrams_to_send(link.now)


@settings(max_examples=60, deadline=None)
@given(
    packets=st.lists(any_packets, min_size=1, max_size=12),
    qp_choice=st.lists(st.integers(0, 2), min_size=12, max_size=12),
    trimmed=st.booleans(),
)
def test_well_formed_but_nonsensical_packets_never_make_the_core_raise(packets, qp_choice, trimmed):
    """Valid ICRC, valid layout, arbitrary field values: SACKs for random PSNs, NACKs with odd
    reasons, ACKs for unknown messages, probes for anything, to either side, mid-transfer."""
    link = Loopback.create()
    link.post(b"y" * 6000)
    link.exchange()
    for index, packet in enumerate(packets):
        towards_b = index % 2 == 0
        target_qp = (link.qp_b if towards_b else link.qp_a, 0x123456, 0)[qp_choice[index]]
        forged = replace(packet, dest_qp=target_qp)  # type: ignore[type-var]
        ip = _context(link, towards_b)
        wire = encode(forged, ip, SRC_PORT)
        if trimmed and isinstance(forged, DataPacket):
            wire = wire[: len(wire) - 4 - len(forged.payload)]
        target = link.b if towards_b else link.a
        target.receive_datagram(_datagram(wire, ip, dscp=12 if trimmed else 4), link.now)
    for _ in range(5):
        link.exchange()
    for endpoint in (link.a, link.b):
        assert endpoint.stats.datagrams_received >= endpoint.stats.total_drops


def test_a_transfer_survives_interleaved_garbage():
    link = Loopback.create()
    msn = link.post(b"z" * 8000)
    ip = _context(link)
    for step in range(40):
        link.b.receive_datagram(_datagram(bytes([step]) * step, ip), link.now)
        link.exchange()
    assert any(getattr(e, "msn", None) == msn for e in link.events_a)
    assert link.b.memory.read(link.rkey, link.va, 8000) == b"z" * 8000
