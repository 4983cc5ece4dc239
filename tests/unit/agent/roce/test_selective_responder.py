"""The responder under selective repeat: packets ahead of the expected PSN are kept and placed
as they arrive (a MIDDLE before its FIRST held until the FIRST says where it goes), each gap is
named once in a selective NAK, writes complete in order once all their bytes arrived, and the
go-back-N responder's checks still hold."""

from __future__ import annotations

import random

from agent.core.drops import DropReason
from agent.core.events import Event, MessageReceived, WriteRejected
from agent.core.memory import MemoryTable
from agent.roce.config import RoceConfig
from agent.roce.packets import SELECTIVE_NAK, RoceAck, RoceCnp, RoceData
from agent.roce.responder import Responder
from agent.roce.selective_responder import SelectiveResponder
from wire.constants import AETH_CREDIT_INVALID, AethSyndrome, RoceOpcode

FIRST, MIDDLE, LAST = (
    RoceOpcode.RC_RDMA_WRITE_FIRST,
    RoceOpcode.RC_RDMA_WRITE_MIDDLE,
    RoceOpcode.RC_RDMA_WRITE_LAST,
)
ONLY, LAST_IMM = RoceOpcode.RC_RDMA_WRITE_ONLY, RoceOpcode.RC_RDMA_WRITE_LAST_IMM
ACK = AethSyndrome.ACK | AETH_CREDIT_INVALID
PMTU = 16
START = 0xFFFFFE  # the PSNs below wrap past 2**24


class Rig:
    def __init__(self, window: int = 256, selective: bool = True) -> None:
        self.memory = MemoryTable(random.Random(1))
        self.buffer = bytearray(1024)
        self.region = self.memory.register(self.buffer, 0x1000)
        self.events: list[Event] = []
        config = RoceConfig(selective_repeat=selective, max_outstanding=window)
        kind = SelectiveResponder if selective else Responder
        self.responder = kind(9, 5, START, config, self.memory, self.events.append)

    def psn(self, index: int) -> int:
        return (START + index) & 0xFFFFFF

    def message(self, packets: int, at: int = 0, va: int = 0x1000) -> list[RoceData]:
        """A write of ``packets`` packets from PSN index ``at``, payload bytes numbered."""
        length = packets * PMTU
        data = bytes((at * PMTU + i) % 251 for i in range(length))
        chunks = [data[i : i + PMTU] for i in range(0, length, PMTU)]
        reth = {"va": va, "rkey": self.region.rkey, "dma_length": length}
        if packets == 1:
            return [RoceData(ONLY, 9, self.psn(at), chunks[0], True, **reth)]
        out = [RoceData(FIRST, 9, self.psn(at), chunks[0], False, **reth)]
        out += [RoceData(MIDDLE, 9, self.psn(at + i), chunks[i]) for i in range(1, packets - 1)]
        out.append(RoceData(LAST_IMM, 9, self.psn(at + packets - 1), chunks[-1], True,
                            immediate=at))  # fmt: skip
        return out

    def feed(self, packet: RoceData) -> DropReason | None:
        return self.responder.on_data(packet, False, 0.0)

    def answers(self) -> list[RoceAck | RoceCnp]:
        return self.responder.packets_to_send()

    def received(self) -> list[MessageReceived]:
        return [e for e in self.events if isinstance(e, MessageReceived)]


def payload(packets: list[RoceData]) -> bytes:
    return b"".join(p.payload for p in packets)


def test_an_out_of_order_packet_is_kept_placed_and_its_gap_naked_once():
    rig = Rig()
    packets = rig.message(6)
    rig.feed(packets[0])
    for packet in packets[2:]:  # packet 1 lost
        assert rig.feed(packet) is None
    # placed where it belongs as it arrived: offset (PSN - FIRST's PSN) x the FIRST's size
    assert rig.buffer[2 * PMTU : 6 * PMTU] == payload(packets[2:])
    assert rig.responder.counters.out_of_order_kept == 4
    assert rig.responder.counters.out_of_sequence == 0
    assert rig.answers() == [RoceAck(5, rig.psn(1), SELECTIVE_NAK, 1)]  # PSN 1, one missing
    assert rig.received() == []  # not all its bytes yet
    assert rig.feed(packets[1]) is None  # the resend
    assert rig.buffer[: 6 * PMTU] == payload(packets)
    assert rig.received() == [MessageReceived(9, 0, rig.region.rkey, 0x1000, 6 * PMTU, 0)]
    assert rig.answers() == [RoceAck(5, rig.psn(5), ACK, 1)]
    assert rig.responder.expected_psn == rig.psn(6)
    assert rig.responder.counters.naks_sent == 1


def test_go_back_n_drops_what_selective_repeat_keeps():
    rig = Rig(selective=False)
    packets = rig.message(4)
    rig.feed(packets[0])
    rig.feed(packets[2])
    rig.feed(packets[3])
    assert rig.buffer[2 * PMTU : 4 * PMTU] == bytes(2 * PMTU)
    assert rig.responder.counters.out_of_sequence == 2


def test_each_gap_gets_one_nak_naming_its_first_psn_and_length():
    rig = Rig()
    packets = rig.message(10)
    for index in (0, 1, 4, 5, 9):  # 2-3 and 6-8 lost
        rig.feed(packets[index])
    rig.feed(packets[5])  # a duplicate of a kept packet: no new gap
    answers = rig.answers()
    assert answers[:2] == [
        RoceAck(5, rig.psn(2), SELECTIVE_NAK, 2),
        RoceAck(5, rig.psn(6), SELECTIVE_NAK, 3),
    ]
    # the duplicate is acknowledged again (cumulatively) and not counted as kept twice
    assert answers[2:] == [RoceAck(5, rig.psn(1), ACK, 0)]
    assert rig.responder.counters.duplicates_received == 1
    for index in (2, 3, 6, 7, 8):
        rig.feed(packets[index])
    assert rig.buffer[: 10 * PMTU] == payload(packets)
    assert [answer.syndrome for answer in rig.answers()] == [ACK]


def test_a_middle_that_arrives_before_its_first_is_held_then_placed():
    rig = Rig()
    packets = rig.message(4)
    rig.feed(packets[2])  # nothing says where it goes yet
    rig.feed(packets[3])
    assert rig.buffer[: 4 * PMTU] == bytes(4 * PMTU)
    rig.feed(packets[1])
    rig.feed(packets[0])  # the FIRST: the held packets go where it says
    assert rig.buffer[: 4 * PMTU] == payload(packets)
    assert len(rig.received()) == 1


def test_writes_complete_in_order_once_all_their_bytes_arrived():
    rig = Rig()
    first = rig.message(3, at=0, va=0x1000)
    second = rig.message(2, at=3, va=0x1100)
    rig.feed(first[0])
    for packet in second:  # the second write arrives whole before the first
        rig.feed(packet)
    assert rig.received() == []
    assert rig.buffer[0x100 : 0x100 + 2 * PMTU] == payload(second)
    rig.feed(first[2])
    rig.feed(first[1])
    assert [(e.msn, e.va, e.immediate) for e in rig.received()] == [(0, 0x1000, 0), (1, 0x1100, 3)]


def test_packets_beyond_the_window_are_dropped():
    rig = Rig(window=4)
    packets = rig.message(6)
    rig.feed(packets[0])
    assert rig.feed(packets[5]) is None  # 5 PSNs ahead of the expected one
    assert rig.responder.counters.out_of_sequence == 1
    assert rig.buffer[5 * PMTU : 6 * PMTU] == bytes(PMTU)
    rig.feed(packets[4])  # within it: kept, and its gap NAKed
    assert rig.answers() == [RoceAck(5, rig.psn(1), SELECTIVE_NAK, 3)]


def test_a_write_with_a_bad_key_is_refused_with_a_remote_access_nak():
    rig = Rig()
    bad = RoceData(ONLY, 9, rig.psn(1), b"abcd", True, 0x1000, rig.region.rkey ^ 1, 4)
    assert rig.feed(bad) is DropReason.BAD_RKEY
    assert [a.syndrome for a in rig.answers()] == [AethSyndrome.NAK_REMOTE_ACCESS_ERROR]
    assert isinstance(rig.events[-1], WriteRejected)


def test_a_write_overlapping_another_is_an_invalid_request():
    rig = Rig()
    packets = rig.message(4)
    rig.feed(packets[0])
    overlapping = rig.message(2, at=2)
    assert rig.feed(overlapping[0]) is DropReason.BAD_FIELD
    assert [a.syndrome for a in rig.answers()] == [AethSyndrome.NAK_INVALID_REQUEST]


def test_a_packet_of_the_wrong_kind_or_size_inside_a_write_is_an_invalid_request():
    rig = Rig()
    packets = rig.message(4)
    rig.feed(packets[0])
    short = RoceData(MIDDLE, 9, rig.psn(2), bytes(PMTU - 4))
    assert rig.feed(short) is DropReason.BAD_FIELD
    rig = Rig()
    packets = rig.message(4)
    rig.feed(packets[0])
    not_last = RoceData(MIDDLE, 9, rig.psn(3), bytes(PMTU))
    assert rig.feed(not_last) is DropReason.BAD_FIELD


def test_a_held_packet_no_write_claims_is_an_invalid_request_when_the_epsn_reaches_it():
    rig = Rig()
    stray = RoceData(MIDDLE, 9, rig.psn(1), bytes(PMTU))
    rig.feed(stray)  # held: its FIRST may yet come
    only = rig.message(1)[0]
    assert rig.feed(only) is DropReason.BAD_FIELD  # PSN 0 was a whole write: 1 is nobody's
    assert AethSyndrome.NAK_INVALID_REQUEST in [a.syndrome for a in rig.answers()]
