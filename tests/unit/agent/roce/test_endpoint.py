"""Two RoCE endpoints wired back to back in virtual time: transfers, loss, congestion
notification end to end, and hostile input dropped and counted, never raised."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.events import ConnectionFailed, Event, MessageAcked, MessageFailed
from agent.roce import RoceConfig, RoceEndpoint, RoceQpSpec
from agent.roce.codec import encode
from agent.roce.packets import RoceAck, RoceData
from wire.constants import (
    ECN_CE,
    ECN_ECT0,
    ECN_NOT_ECT,
    MRC_OPCODE_MIN,
    ROCE_DATA_OPCODES,
    AethSyndrome,
    RoceDscp,
    RoceOpcode,
)

A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
QP_A, QP_B = 0x11, 0x22
STEP = 10e-6


class Wire:
    """Endpoint ``a`` (requester) and ``b`` (responder, with a region), and the link."""

    def __init__(self, config: RoceConfig | None = None, seed: int = 0) -> None:
        config = config or RoceConfig()
        self.a = RoceEndpoint([A], seed=seed + 1)
        self.b = RoceEndpoint([B], seed=seed + 2)
        self.buffer = bytearray(1 << 20)
        self.region = self.b.register_memory(self.buffer, 0x10000)
        self.a.connect(RoceQpSpec(QP_A, QP_B, B, 100, 900, config))
        self.b.connect(RoceQpSpec(QP_B, QP_A, A, 900, 100, config))
        self.now = 0.0
        self.events: list[Event] = []
        self.sent: list[OutgoingDatagram] = []
        #: Decides per datagram a->b (or b->a): deliver as is, lose it (None) or mark it.
        self.a_to_b: Callable[[OutgoingDatagram], int | None] = lambda d: d.ecn
        self.b_to_a: Callable[[OutgoingDatagram], int | None] = lambda d: d.ecn

    def step(self) -> None:
        self.now += STEP
        for source, target, path in ((self.a, self.b, self.a_to_b), (self.b, self.a, self.b_to_a)):
            source.handle_timer(self.now)
            batch = []
            for datagram in source.datagrams_to_send(self.now):
                self.sent.append(datagram)
                ecn = path(datagram)
                if ecn is not None:
                    batch.append(
                        IncomingDatagram(
                            datagram.payload, datagram.ip, datagram.src_port, datagram.dscp, ecn
                        )
                    )
            if batch:
                target.receive_datagrams(batch, self.now)
        while (event := self.a.next_event()) is not None:
            self.events.append(event)
        while self.b.next_event() is not None:
            pass

    def run(self, done: Callable[[], bool], limit: float = 30.0) -> None:
        while not done():
            assert self.now < limit, "not done in virtual time"
            self.step()

    def acked(self) -> int:
        return sum(1 for event in self.events if isinstance(event, MessageAcked))


def _post(wire: Wire, data: bytes, message: int = 64 * 1024) -> int:
    for offset in range(0, len(data), message):
        wire.a.post_write(QP_A, data[offset : offset + message], 0x10000 + offset, wire.region.rkey)
    return -(-len(data) // message)


def test_a_transfer_arrives_whole_on_one_fixed_path_in_roces_classes():
    wire = Wire()
    data = os.urandom(500_000)
    messages = _post(wire, data)
    wire.run(lambda: wire.acked() == messages)
    assert bytes(wire.buffer[: len(data)]) == data
    from_a = [d for d in wire.sent if d.ip.src == A]
    from_b = [d for d in wire.sent if d.ip.src == B]
    assert len({d.src_port for d in from_a}) == 1 and len({d.src_port for d in from_b}) == 1
    assert all(0xC000 <= d.src_port <= 0xFFFF for d in wire.sent)
    assert {(d.dscp, d.ecn) for d in from_a} == {(RoceDscp.DATA, ECN_ECT0)}
    assert {(d.dscp, d.ecn) for d in from_b} == {(RoceDscp.ACK, ECN_NOT_ECT)}
    assert all(d.payload[0] < MRC_OPCODE_MIN for d in wire.sent)
    assert wire.a.stats.total_drops == 0 and wire.b.stats.total_drops == 0


def test_a_transfer_survives_random_loss_both_ways_with_go_back_n():
    rng = random.Random(5)
    wire = Wire()
    wire.a_to_b = lambda d: None if rng.random() < 0.03 else d.ecn
    wire.b_to_a = lambda d: None if rng.random() < 0.03 else d.ecn
    data = os.urandom(400_000)
    messages = _post(wire, data)
    wire.run(lambda: wire.acked() == messages)
    assert bytes(wire.buffer[: len(data)]) == data
    stats = wire.a.roce_stats(QP_A)
    responder = wire.b.roce_stats(QP_B)
    assert stats.go_backs > 0 and responder.out_of_sequence > 0
    # one NAK per gap, not one per packet dropped out of sequence
    assert responder.naks_sent < responder.out_of_sequence
    connection = wire.a.connection_stats(QP_A)
    assert connection.total_retransmits > 0 and connection.bytes_acked == len(data)


def test_ce_marks_draw_cnps_and_the_sender_slows_down():
    wire = Wire()
    marking = [True]
    wire.a_to_b = lambda d: ECN_CE if marking[0] and d.payload[0] in ROCE_DATA_OPCODES else d.ecn
    data = os.urandom(300_000)
    messages = _post(wire, data)
    wire.run(lambda: wire.b.roce_stats(QP_B).cnps_sent >= 3)
    stats = wire.a.roce_stats(QP_A)
    assert stats.cnps_received == wire.b.roce_stats(QP_B).cnps_sent
    assert stats.rate < RoceConfig().dcqcn.line_rate
    assert {d.dscp for d in wire.sent if d.payload[0] == RoceOpcode.CNP} == {RoceDscp.CNP}
    # no more than one CNP per 50 us, however many marked packets arrived
    cnp_times = wire.b.roce_stats(QP_B).cnps_sent
    assert cnp_times <= wire.now / 50e-6 + 1
    marking[0] = False
    wire.run(lambda: wire.acked() == messages)
    assert bytes(wire.buffer[: len(data)]) == data


def test_a_dead_path_ends_in_the_error_state_with_every_write_failed():
    config = RoceConfig(timeout=8, retry_cnt=7)
    wire = Wire(config)
    wire.a_to_b = lambda d: None
    messages = _post(wire, os.urandom(200_000))
    wire.run(lambda: any(isinstance(e, ConnectionFailed) for e in wire.events))
    assert wire.a.roce_stats(QP_A).state == "ERROR"
    assert sum(isinstance(e, MessageFailed) for e in wire.events) == messages
    # the first expiry and seven retries, each timer noticed within a step of expiring
    timeout = 4.096e-6 * 2**8
    assert 8 * timeout <= wire.now <= 8 * (timeout + STEP) + STEP
    late = RoceAck(QP_A, 100, AethSyndrome.ACK, 0)
    ip = IpContext(B, A)
    wire.a.receive_datagrams([IncomingDatagram(encode(late, ip, 0xC000), ip, 0xC000, 28, 0)], 1)
    assert wire.a.stats.drops[DropReason.CONNECTION_CLOSED] == 1
    assert wire.a.datagrams_to_send(wire.now + 1) == []


def test_closing_a_qp_fails_its_outstanding_writes():
    wire = Wire()
    wire.a.post_write(QP_A, b"x" * 5000, 0x10000, wire.region.rkey)
    wire.a.close(QP_A)
    assert wire.a.connections == ()
    event = wire.a.next_event()
    assert isinstance(event, MessageFailed) and "closed" in event.reason


def _incoming(payload: bytes, src: bytes = A, dst: bytes = B, port: int = 4791):
    ip = IpContext(src, dst)
    return IncomingDatagram(payload, ip, 0xC001, RoceDscp.DATA, ECN_ECT0, 0, port)


def _write(wire: Wire, dest_qp: int = QP_B, src: bytes = A, dst: bytes = B) -> bytes:
    packet = RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY, dest_qp, 900, b"abcd", True, 0x10000,
                      wire.region.rkey, 4)  # fmt: skip
    return encode(packet, IpContext(src, dst), 0xC001)


def test_stray_packets_are_dropped_and_counted_by_reason():
    wire = Wire()
    stranger = bytes([10, 0, 0, 9])
    wire.b.receive_datagrams(
        [
            _incoming(_write(wire, dest_qp=0x999)),
            _incoming(_write(wire, src=stranger), src=stranger),
            _incoming(_write(wire), dst=stranger),
            _incoming(_write(wire), port=4792),
            _incoming(b"\x0a\x00"),
            _incoming(_write(wire)[:-1] + b"\x00"),
        ],
        0.0,
    )
    drops = {reason: count for reason, count in wire.b.stats.drops.items() if count}
    assert drops == {
        DropReason.UNKNOWN_QP: 1,
        DropReason.WRONG_SOURCE: 1,
        DropReason.UNKNOWN_DESTINATION: 1,
        DropReason.WRONG_PORT: 1,
        DropReason.TRUNCATED: 1,
        DropReason.BAD_ICRC: 1,
    }
    assert wire.buffer[:4] == bytes(4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_nothing_a_peer_sends_makes_the_endpoint_raise(payloads):
    wire = Wire()
    wire.b.receive_datagrams([_incoming(payload) for payload in payloads], 0.0)
    wire.b.datagrams_to_send(0.0)
    assert wire.b.stats.datagrams_received == len(payloads)


def _lose_data_packet(number: int) -> Callable[[OutgoingDatagram], int | None]:
    """A path that loses the ``number``-th data packet (from 0) the first time it passes."""
    seen = [0]

    def path(datagram: OutgoingDatagram) -> int | None:
        if datagram.payload[0] in ROCE_DATA_OPCODES:
            seen[0] += 1
            if seen[0] == number + 1:
                return None
        return datagram.ecn

    return path


def _resent_after_one_loss(config: RoceConfig, data: bytes) -> int:
    """Data packets sent again for a write whose sixth packet was lost once."""
    wire = Wire(config)
    wire.a_to_b = _lose_data_packet(5)
    messages = _post(wire, data)
    wire.run(lambda: wire.acked() == messages)
    assert bytes(wire.buffer[: len(data)]) == data
    return wire.a.connection_stats(QP_A).total_retransmits


def test_selective_repeat_resends_only_the_lost_packet_where_go_back_n_resends_the_rest():
    data = os.urandom(64 * 1024)
    assert _resent_after_one_loss(RoceConfig(selective_repeat=True), data) == 1
    # go-back-N: from the hole to the end of what was in flight (the whole write)
    assert _resent_after_one_loss(RoceConfig(), data) == len(data) // 1024 - 5


def test_a_transfer_survives_random_loss_both_ways_with_selective_repeat():
    rng = random.Random(5)
    config = RoceConfig(selective_repeat=True, adaptive_retransmission=True)
    wire = Wire(config)
    wire.a_to_b = lambda d: None if rng.random() < 0.03 else d.ecn
    wire.b_to_a = lambda d: None if rng.random() < 0.03 else d.ecn
    data = os.urandom(400_000)
    messages = _post(wire, data)
    wire.run(lambda: wire.acked() == messages)
    assert bytes(wire.buffer[: len(data)]) == data
    stats = wire.a.roce_stats(QP_A)
    responder = wire.b.roce_stats(QP_B)
    assert stats.go_backs == 0 and stats.naks_received > 0
    assert responder.out_of_order_kept > 0 and responder.out_of_sequence == 0
    assert wire.a.connection_stats(QP_A).srtt is not None


def test_a_qp_on_a_second_plane_sends_from_that_plane():
    a = RoceEndpoint([A, bytes([10, 1, 0, 1])], seed=1)
    a.connect(RoceQpSpec(QP_A, QP_B, bytes([10, 1, 0, 2]), 100, 900, RoceConfig(), plane=1))
    a.post_write(QP_A, b"x" * 3000, 0x10000, 1)
    sent = a.datagrams_to_send(0.0)
    assert sent and {(d.plane, d.ip.src) for d in sent} == {(1, bytes([10, 1, 0, 1]))}
