"""SACK coalescing: one SACK answers every data packet handed over since the last one.

Specification: the receiver answers a batch of data packets with one SACK that acknowledges
them all (cumulative PSN + bitmap) and echoes the latest packet's EV and timestamp; it answers
at once a CE-marked packet, and before any other answer (duplicate, trim, probe) it first
sends the pending SACK, while a message's completion ACK waits behind the pending SACK (a
SACK per completed message would be a third of them at line rate); it never lets the
pending packets spread wider than the 64-bit bitmap, nor more than ``sack_coalesce_max`` of
them wait. The sender acknowledges every packet a coalesced SACK reports and takes its RTT
sample before scheduling confirmations.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent.core import IncomingDatagram, MessageAcked, MessageReceived, MrcConfig
from agent.core.events import Event
from agent.core.memory import MemoryTable
from agent.core.packets import (
    AckPacket,
    DataPacket,
    NackPacket,
    Packet,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from agent.core.receiver import Receiver
from agent.core.stats import ConnectionCounters
from tests.unit.agent.core.loopback import Flight, Loopback
from wire.constants import CC_FLAG_ECN_ECHO, ECN_CE, Opcode, SackSkipMode

DATA = bytes(random.Random(7).randbytes(5000))  # five packets of 1024 bytes, last one shorter
_VA = 0x1000
_REGION = 1 << 20


def _receiver(coalesce_max: int = 16) -> tuple[Receiver, int]:
    config = MrcConfig(sack_coalesce_max=coalesce_max)
    memory = MemoryTable(random.Random(1))
    region = memory.register(bytearray(_REGION), _VA)
    events: deque[Event] = deque()
    return Receiver(config, 7, 9, 0, memory, ConnectionCounters(), events), region.rkey


def _middle(psn: int, rkey: int, timestamp: int = 0) -> DataPacket:
    """A middle packet of a message far larger than the test sends (it never completes)."""
    return DataPacket(
        opcode=Opcode.WRITE_MIDDLE,
        dest_qp=7,
        psn=psn,
        msn=0,
        rqmsn=0,
        va=_VA + psn * 16,
        rkey=rkey,
        dma_length=_REGION,
        payload=b"x" * 16,
        tx_timestamp=timestamp,
    )


def _reported(sack: SackPacket) -> set[int]:
    """PSNs (from 0) a SACK acknowledges: below the cumulative PSN, and the bitmap's bits."""
    base = sack.cack_psn + sack.sack_offset
    return set(range(sack.cack_psn)) | {base + i for i in range(64) if (sack.bitmap >> i) & 1}


def _sacks(replies: list[Packet]) -> list[SackPacket]:
    return [r for r in replies if isinstance(r, SackPacket)]


def test_packets_handed_over_together_are_answered_by_one_sack_echoing_the_latest():
    receiver, rkey = _receiver()
    replies: list[Packet] = []
    for psn, ev in ((0, 100), (2, 101), (1, 102)):
        assert receiver.on_data(_middle(psn, rkey, timestamp=psn + 40), ev, False, replies) is None
    assert replies == [] and receiver.sack_pending and receiver.pending_sack_ev == 102
    receiver.flush_sack(replies)
    [sack] = _sacks(replies)
    assert sack.cack_psn == 3 and _reported(sack) >= {0, 1, 2}
    assert sack.entropy == 102 and sack.echoed_timestamp == 41
    assert (sack.cack_psn + sack.ack_psn_offset) == 1
    assert not receiver.sack_pending
    receiver.flush_sack(replies)
    assert len(replies) == 1  # nothing pending: nothing more to say


def test_no_more_than_sack_coalesce_max_packets_wait_for_their_sack():
    receiver, rkey = _receiver(coalesce_max=2)
    replies: list[Packet] = []
    for psn in range(5):
        receiver.on_data(_middle(psn, rkey), 100 + psn, False, replies)
    assert [s.cack_psn for s in _sacks(replies)] == [2, 4]
    receiver.flush_sack(replies)
    assert [s.cack_psn for s in _sacks(replies)] == [2, 4, 5]


def test_a_ce_marked_packet_is_answered_at_once_after_the_pending_sack():
    receiver, rkey = _receiver()
    replies: list[Packet] = []
    receiver.on_data(_middle(0, rkey), 100, False, replies)
    receiver.on_data(_middle(1, rkey), 101, True, replies)
    first, marked = _sacks(replies)
    assert first.entropy == 100 and first.skip_mode == SackSkipMode.NONE
    assert marked.entropy == 101 and marked.skip_mode == SackSkipMode.SKIP_ONCE
    assert marked.cc_flags & CC_FLAG_ECN_ECHO and marked.cack_psn == 2
    assert not receiver.sack_pending


def test_pending_packets_never_spread_beyond_what_one_bitmap_reports():
    receiver, rkey = _receiver(coalesce_max=1000)
    replies: list[Packet] = []
    # PSN 0 is missing, so nothing is cumulative: only the bitmap can report these.
    for psn in (5, 40, 68, 69, 150):
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
    receiver.flush_sack(replies)
    reported: set[int] = set()
    for sack in _sacks(replies):
        assert sack.cack_psn == 0
        reported |= _reported(sack)
    assert reported == {5, 40, 68, 69, 150}
    assert len(_sacks(replies)) == 3  # {5, 40, 68}, then 69 is 64 past 5, then 150


def test_a_resend_that_fills_the_hole_at_cack_forces_no_sack_out():
    receiver, rkey = _receiver(coalesce_max=1000)
    replies: list[Packet] = []
    for psn in range(1, 101):  # PSN 0 lost: these wait above it, reported by bitmaps
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
    receiver.flush_sack(replies)
    replies.clear()
    # The resend of 0 arrives among newer packets: cack jumps past all of them, so the
    # cumulative PSN reports 0 and the old ones and one SACK still answers the whole batch.
    for psn in (*range(101, 111), 0, *range(111, 121)):
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
    assert replies == []
    receiver.flush_sack(replies)
    [sack] = _sacks(replies)
    assert sack.cack_psn == 121


def _rare(draw: int) -> bool:
    """A flush after about one packet in 16 (the runtime's batch end), so SACKs also wait."""
    return draw == 15


def _as_arrivals(steps: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
    """Steps as (PSN, flush after it): a step of 0-3 moves past that many lost PSNs, a larger
    one is taken as a PSN of its own (modulo 300) without moving the ascending run."""
    arrivals: list[tuple[int, bool]] = []
    psn = 0
    for step, flush in steps:
        if 0 <= step <= 3:
            psn = (psn + 1 + step) % 300
            arrivals.append((psn, flush))
        else:
            arrivals.append((step % 300, flush))
    return arrivals


@settings(max_examples=300, deadline=None)
@given(
    # Mostly ascending PSNs with holes (what a sprayed flight with losses looks like), and
    # some from anywhere: resends, late and duplicate packets.
    arrivals=st.lists(
        st.tuples(st.integers(0, 3) | st.integers(-299, 299), st.integers(0, 15).map(_rare)),
        min_size=1,
        max_size=400,
    ).map(_as_arrivals),
    coalesce_max=st.integers(1, 80),
)
@example(arrivals=[(1, False), (65, False)], coalesce_max=80)  # spread of exactly 64
def test_every_sack_reports_every_packet_that_arrived_since_the_previous_one(
    arrivals: list[tuple[int, bool]], coalesce_max: int
):
    """Whatever the order, gaps, duplicates and flushes: the first SACK after a packet must
    report it (cumulatively or in its bitmap), or the sender would take it for lost."""
    receiver, rkey = _receiver(coalesce_max=coalesce_max)
    replies: list[Packet] = []
    unreported: set[int] = set()
    arrived: set[int] = set()
    for psn, flush_after in arrivals:
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
        if flush_after:
            receiver.flush_sack(replies)
        sacks = _sacks(replies)
        for sack in sacks:
            assert unreported <= _reported(sack), "a SACK left out a packet that came before it"
            unreported = set()
        if psn not in arrived and not (sacks and psn in _reported(sacks[-1])):
            unreported.add(psn)
        arrived.add(psn)
        replies.clear()
    receiver.flush_sack(replies)
    assert all(unreported <= _reported(sack) for sack in _sacks(replies))
    assert unreported == set() or _sacks(replies)


def test_other_answers_follow_the_pending_sack_in_order():
    receiver, rkey = _receiver()
    cases: list[tuple[str, type]] = []
    for kind in ("duplicate", "trim", "probe"):
        replies: list[Packet] = []
        start = receiver.cack
        receiver.on_data(_middle(start, rkey), 100, False, replies)
        receiver.on_data(_middle(start + 1, rkey), 100, False, replies)
        assert replies == [] and receiver.cack == start + 2
        if kind == "duplicate":
            receiver.on_data(_middle(start, rkey), 100, False, replies)
        elif kind == "trim":
            header = _middle(start + 3, rkey)
            trimmed = TrimmedDataHeader(
                header.opcode, 7, header.psn, 0, 0, header.va, rkey, header.dma_length
            )
            receiver.on_trimmed(trimmed, 100, False, False, replies)
        else:
            receiver.on_probe(ReliabilityProbe(7, receiver.cack), 100, replies)
        cases.append((kind, type(replies[1])))
        assert isinstance(replies[0], SackPacket) and not replies[0].probe_response
        assert len(replies) == 2
    assert cases == [("duplicate", SackPacket), ("trim", NackPacket), ("probe", SackPacket)]


def _message_packet(msn: int, index: int, rkey: int) -> DataPacket:
    """Packet ``index`` (0 or 1) of two-packet message ``msn``: PSN ``2 * msn + index``."""
    psn = 2 * msn + index
    return DataPacket(
        opcode=Opcode.WRITE_FIRST if index == 0 else Opcode.WRITE_LAST,
        dest_qp=7,
        psn=psn,
        msn=msn,
        rqmsn=0,
        va=_VA + 64 * msn + 16 * index,
        rkey=rkey,
        dma_length=32,
        payload=b"m" * 16,
        tx_timestamp=psn,
    )


def test_messages_completed_in_one_batch_are_confirmed_after_its_one_sack():
    receiver, rkey = _receiver(coalesce_max=64)
    replies: list[Packet] = []
    for psn in range(5):  # messages 0 and 1 complete, message 2 is half there
        receiver.on_data(_message_packet(psn // 2, psn % 2, rkey), 100 + psn, False, replies)
    assert replies == [] and receiver.sack_pending
    receiver.flush_sack(replies)
    sack, *acks = replies
    assert isinstance(sack, SackPacket) and _reported(sack) >= set(range(5))
    assert sack.entropy == 104 and sack.echoed_timestamp == 4
    assert [(type(a), a.msn) for a in acks] == [(AckPacket, 0), (AckPacket, 1)]
    receiver.flush_sack(replies)
    assert len(replies) == 3  # the ACKs went out with their SACK, once


def test_a_completion_with_no_sack_pending_is_confirmed_at_once():
    receiver, rkey = _receiver(coalesce_max=1)  # every packet answered as it arrives
    replies: list[Packet] = []
    receiver.on_data(_message_packet(0, 0, rkey), 100, False, replies)
    receiver.on_data(_message_packet(0, 1, rkey), 101, False, replies)
    assert [type(r) for r in replies] == [SackPacket, SackPacket, AckPacket]


def test_a_completed_message_is_sacked_then_confirmed_in_one_batch():
    link = Loopback.create()
    msn = link.post(DATA)
    link.exchange()
    answers = [type(f.packet()) for f in link.in_flight]
    assert answers == [SackPacket, AckPacket]
    link.exchange()
    assert [e for e in link.events_a if isinstance(e, MessageAcked)] == [
        MessageAcked(link.qp_a, msn, len(DATA))
    ]
    stats = link.a.connection_stats(link.qp_a)
    assert stats.packets_acked == 5 and stats.srtt is not None and stats.bytes_in_flight == 0


def test_every_message_arrives_once_with_coalesced_sacks_under_loss_and_ce_marks():
    config = MrcConfig(ev_set_size=32, sack_coalesce_max=4)
    link = Loopback.create(config)
    rng = random.Random(3)
    messages = [rng.randbytes(rng.randrange(1, 9000)) for _ in range(12)]
    offsets = []
    offset = 0
    for data in messages:
        link.post(data, offset=offset)
        offsets.append(offset)
        offset += len(data)

    def lossy(flight: Flight) -> bool:
        return isinstance(flight.packet(), DataPacket) and rng.random() < 0.1

    def marks(flight: Flight, incoming: IncomingDatagram) -> IncomingDatagram:
        return replace(incoming, ecn=ECN_CE) if rng.random() < 0.05 else incoming

    while link.now < 0.5 and sum(isinstance(e, MessageAcked) for e in link.events_a) < 12:
        if link.in_flight:
            link.exchange(drop=lossy, rewrite=marks)
        else:
            link.idle_until_timer()
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 12
    received = [e for e in link.events_b if isinstance(e, MessageReceived)]
    assert sorted(e.msn for e in received) == list(range(12))
    for data, start in zip(messages, offsets, strict=True):
        assert link.b.memory.read(link.rkey, link.va + start, len(data)) == data
