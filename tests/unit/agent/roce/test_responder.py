"""The responder, as a RoCE NIC's: only the expected PSN is placed, one NAK per gap,
duplicates acknowledged again, ACKs coalesced, bad writes refused with the right NAK, and
CE-marked data answered with at most one CNP per 50 us."""

from __future__ import annotations

import random

import pytest

from agent.core.drops import DropReason
from agent.core.events import Event, MessageReceived, WriteRejected
from agent.core.memory import MemoryTable
from agent.roce.config import RoceConfig
from agent.roce.packets import RoceAck, RoceCnp, RoceData
from agent.roce.responder import Responder
from wire.constants import AETH_CREDIT_INVALID, AethSyndrome, RoceOpcode

FIRST, MIDDLE, LAST = (
    RoceOpcode.RC_RDMA_WRITE_FIRST,
    RoceOpcode.RC_RDMA_WRITE_MIDDLE,
    RoceOpcode.RC_RDMA_WRITE_LAST,
)
ONLY, LAST_IMM = RoceOpcode.RC_RDMA_WRITE_ONLY, RoceOpcode.RC_RDMA_WRITE_LAST_IMM
ACK = AethSyndrome.ACK | AETH_CREDIT_INVALID
NAK_SEQ = AethSyndrome.NAK_PSN_SEQUENCE_ERROR
PMTU = 16
START = 0xFFFFFE  # the PSNs below wrap past 2**24


class Rig:
    def __init__(self, ack_every: int = 16) -> None:
        self.memory = MemoryTable(random.Random(1))
        self.buffer = bytearray(1024)
        self.region = self.memory.register(self.buffer, 0x1000)
        self.events: list[Event] = []
        self.responder = Responder(
            9, 5, START, RoceConfig(ack_every=ack_every), self.memory, self.events.append
        )

    def psn(self, index: int) -> int:
        return (START + index) & 0xFFFFFF

    def write(self, index: int, opcode: int, payload: bytes, **fields) -> RoceData:
        values = {"ack_req": opcode in (LAST, LAST_IMM, ONLY)}
        if opcode in (FIRST, ONLY):
            values |= {"va": 0x1000, "rkey": self.region.rkey}
        values |= fields
        return RoceData(opcode, 9, self.psn(index), payload, **values)

    def message(self, packets: int = 4) -> list[RoceData]:
        length = packets * PMTU
        if packets == 1:
            return [self.write(0, ONLY, bytes(PMTU), dma_length=length)]
        out = [self.write(0, FIRST, bytes(range(PMTU)), dma_length=length)]
        out += [self.write(i, MIDDLE, bytes([i]) * PMTU) for i in range(1, packets - 1)]
        out.append(self.write(packets - 1, LAST, bytes([99]) * PMTU))
        return out

    def feed(self, packet: RoceData, now: float = 0.0, ce: bool = False) -> DropReason | None:
        return self.responder.on_data(packet, ce, now)

    def answers(self) -> list[RoceAck | RoceCnp]:
        return self.responder.packets_to_send()


def test_a_message_in_order_is_placed_and_completed_with_one_ack():
    rig = Rig()
    packets = rig.message(4)
    for packet in packets:
        assert rig.feed(packet) is None
    assert rig.buffer[:16] == bytes(range(16)) and rig.buffer[48:64] == bytes([99]) * 16
    assert rig.events == [MessageReceived(9, 0, rig.region.rkey, 0x1000, 64, None)]
    assert rig.answers() == [RoceAck(5, rig.psn(3), ACK, 1)]
    assert rig.answers() == []
    assert rig.responder.expected_psn == rig.psn(4)


def test_an_out_of_order_packet_is_dropped_and_its_gap_naked_once():
    rig = Rig()
    packets = rig.message(6)
    rig.feed(packets[0])
    for packet in packets[2:]:  # packet 1 lost: 4 packets beyond the gap
        assert rig.feed(packet) is None
    assert rig.responder.counters.out_of_sequence == 4
    assert rig.answers() == [RoceAck(5, rig.psn(1), NAK_SEQ, 0)]
    rig.feed(packets[3])  # more of the same gap, in a later turn: still no second NAK
    assert rig.answers() == []
    assert rig.buffer[32:64] == bytes(32)  # nothing beyond the gap was placed
    # the requester goes back: everything from the NAKed PSN arrives in order
    for packet in packets[1:]:
        assert rig.feed(packet) is None
    assert rig.answers() == [RoceAck(5, rig.psn(5), ACK, 1)]
    assert rig.responder.counters.naks_sent == 1


def test_a_new_gap_after_the_first_one_closed_gets_its_own_nak():
    rig = Rig()
    packets = rig.message(6)
    rig.feed(packets[0])
    rig.feed(packets[2])
    assert [a.syndrome for a in rig.answers()] == [NAK_SEQ]
    rig.feed(packets[1])
    rig.feed(packets[2])
    rig.feed(packets[4])  # packet 3 lost this time
    assert rig.answers() == [RoceAck(5, rig.psn(3), NAK_SEQ, 0)]


def test_a_nak_whose_gap_filled_before_it_left_becomes_an_ack():
    rig = Rig()
    packets = rig.message(4)
    rig.feed(packets[0])
    rig.feed(packets[2])
    rig.feed(packets[1])
    rig.feed(packets[2])
    rig.feed(packets[3])
    assert rig.answers() == [RoceAck(5, rig.psn(3), ACK, 1)]


def test_a_duplicate_is_not_placed_again_but_acknowledged_again():
    rig = Rig()
    packets = rig.message(2)
    for packet in packets:
        rig.feed(packet)
    rig.answers()
    rig.buffer[0] = 0xEE
    assert rig.feed(packets[0]) is None
    assert rig.buffer[0] == 0xEE
    assert rig.responder.counters.duplicates_received == 1
    assert rig.answers() == [RoceAck(5, rig.psn(1), ACK, 1)]
    assert len([e for e in rig.events if isinstance(e, MessageReceived)]) == 1


@pytest.mark.parametrize("ack_every", [1, 4, 16])
def test_acks_are_coalesced_every_n_packets_and_at_each_message_end(ack_every):
    rig = Rig(ack_every=ack_every)
    packets = rig.message(10)
    acks = []
    for packet in packets:  # one packet per turn: the caller asks after each
        rig.feed(packet)
        acks += [answer.psn for answer in rig.answers()]
    # the count restarts after each ACK; the message end always gets one
    expected = []
    since = 0
    for i in range(10):
        since += 1
        if since >= ack_every or i == 9:
            expected.append(rig.psn(i))
            since = 0
    assert acks == expected


def test_however_many_acks_fall_due_in_one_turn_one_ack_answers_them():
    rig = Rig(ack_every=2)
    for index in range(3):  # three one-packet messages, each with AckReq
        packet = RoceData(ONLY, 9, rig.psn(index), b"abcd", True, 0x1000, rig.region.rkey, 4)
        rig.feed(packet)
    assert rig.answers() == [RoceAck(5, rig.psn(2), ACK, 3)]


def test_a_write_with_a_bad_key_or_range_is_refused_with_a_remote_access_nak():
    rig = Rig()
    bad_key = rig.write(0, ONLY, b"abcd", rkey=rig.region.rkey ^ 1, dma_length=4)
    assert rig.feed(bad_key) is DropReason.BAD_RKEY
    outside = rig.write(0, ONLY, b"abcd", va=0x1000 + 1022, dma_length=4)
    assert rig.feed(outside) is DropReason.OUT_OF_BOUNDS
    answers = rig.answers()
    assert [a.syndrome for a in answers] == [AethSyndrome.NAK_REMOTE_ACCESS_ERROR] * 2
    assert all(a.psn == rig.psn(0) for a in answers)
    assert [type(e) for e in rig.events] == [WriteRejected, WriteRejected]
    assert rig.buffer == bytearray(1024)
    assert rig.responder.expected_psn == rig.psn(0)


@pytest.mark.parametrize(
    "case",
    ["middle_first", "first_twice", "too_long", "too_short", "odd_middle"],
)
def test_a_broken_write_is_an_invalid_request(case):
    rig = Rig()
    first = rig.write(0, FIRST, bytes(PMTU), dma_length=2 * PMTU)
    sequences = {
        "middle_first": [rig.write(0, MIDDLE, bytes(PMTU))],
        "first_twice": [first, rig.write(1, FIRST, bytes(PMTU), dma_length=2 * PMTU)],
        "too_long": [first, rig.write(1, LAST, bytes(PMTU + 4))],
        "too_short": [first, rig.write(1, LAST, bytes(4))],
        "odd_middle": [rig.write(0, FIRST, bytes(PMTU - 1), dma_length=64)],
    }[case]
    results = [rig.feed(packet) for packet in sequences]
    assert results[-1] is DropReason.BAD_FIELD
    assert [a.syndrome for a in rig.answers()] == [AethSyndrome.NAK_INVALID_REQUEST]
    assert isinstance(rig.events[-1], WriteRejected)


def test_ce_marked_data_is_answered_by_at_most_one_cnp_per_50_us():
    rig = Rig()
    packets = rig.message(8)
    cnps = []
    for index, packet in enumerate(packets):
        rig.feed(packet, now=index * 20e-6, ce=True)  # a marked packet every 20 us
        cnps += [index for a in rig.answers() if isinstance(a, RoceCnp)]
    assert cnps == [0, 3, 6]  # at 0, 60 and 120 us
    assert rig.responder.counters.ecn_marks_received == 8
    assert rig.responder.counters.cnps_sent == 3


def test_a_marked_packet_out_of_sequence_still_draws_a_cnp():
    rig = Rig()
    rig.feed(rig.message(3)[2], ce=True)
    answers = rig.answers()
    assert RoceCnp(5) in answers and any(isinstance(a, RoceAck) for a in answers)


def test_writes_land_only_in_regions_of_the_qps_protection_domain():
    memory = MemoryTable(random.Random(1))
    mine, other = bytearray(64), bytearray(64)
    own = memory.register(mine, 0x1000, pd=3)
    foreign = memory.register(other, 0x2000, pd=4)
    events: list[Event] = []
    responder = Responder(9, 5, 0, RoceConfig(), memory, events.append, pd=3)
    write = RoceData(ONLY, 9, 0, b"abcd", True, 0x1000, own.rkey, 4)
    assert responder.on_data(write, False, 0.0) is None
    assert mine[:4] == b"abcd"
    refused = RoceData(ONLY, 9, 1, b"wxyz", True, 0x2000, foreign.rkey, 4)
    assert responder.on_data(refused, False, 0.0) is DropReason.BAD_RKEY
    assert other[:4] == bytes(4) and isinstance(events[-1], WriteRejected)
    syndromes = [a.syndrome for a in responder.packets_to_send() if isinstance(a, RoceAck)]
    assert AethSyndrome.NAK_REMOTE_ACCESS_ERROR in syndromes
