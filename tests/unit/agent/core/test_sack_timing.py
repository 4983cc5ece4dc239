"""When a coalesced SACK goes out: due, held, or asked for.

Specification: a pending SACK is *due* once ``sack_every`` data packets wait for it or one
of them carried the sender's ACK request (a completed message's ACK waits behind it);
out-of-order arrival alone does not make it due (under spraying most packets arrive out of
order). A SACK that is not due is held until its oldest packet waited ``sack_delay`` or the
peer went quiet for ``sack_quiet_gaps`` of its usual gaps between data packets, whichever
is first; the connection's timer says when. The sender asks for an ACK on a resend, and on
the last packet of a burst after which it sends nothing more for now (all sent, or
blocked), unless a packet that asked is still unanswered. Every SACK and message ACK sent
is counted.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import replace

from agent.core import MrcConfig
from agent.core.codec import decode
from agent.core.events import Event
from agent.core.memory import MemoryTable
from agent.core.packets import AckPacket, DataPacket, Packet, SackPacket
from agent.core.receiver import Receiver
from agent.core.stats import ConnectionCounters
from tests.unit.agent.core.loopback import Flight, Loopback, to_incoming
from wire.constants import Opcode

_VA = 0x1000
_REGION = 1 << 20


def _receiver(**changes: object) -> tuple[Receiver, int, ConnectionCounters]:
    config = replace(MrcConfig(), **changes)  # type: ignore[arg-type]
    memory = MemoryTable(random.Random(1))
    region = memory.register(bytearray(_REGION), _VA)
    counters = ConnectionCounters()
    events: deque[Event] = deque()
    return Receiver(config, 7, 9, 0, memory, counters, events), region.rkey, counters


def _middle(psn: int, rkey: int, ack_req: bool = False, msn: int = 1) -> DataPacket:
    """A middle packet of a message far larger than the test sends (it never completes)."""
    return DataPacket(
        opcode=Opcode.WRITE_MIDDLE, dest_qp=7, psn=psn, msn=msn, rqmsn=0, va=_VA + psn * 16,
        rkey=rkey, dma_length=_REGION, payload=b"x" * 16, tx_timestamp=psn, ack_req=ack_req,
    )  # fmt: skip


def _whole(msn: int, psn: int, rkey: int) -> DataPacket:
    """A one-packet message."""
    return DataPacket(
        opcode=Opcode.WRITE_ONLY, dest_qp=7, psn=psn, msn=msn, rqmsn=0, va=_VA + psn * 16,
        rkey=rkey, dma_length=16, payload=b"w" * 16, tx_timestamp=psn,
    )  # fmt: skip


# --- the receiver: when a SACK is due ---------------------------------------------------------


def test_fewer_than_sack_every_packets_wait_and_the_last_of_them_makes_it_due():
    receiver, rkey, _ = _receiver(sack_every=4)
    replies: list[Packet] = []
    for psn in range(3):
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
        assert receiver.sack_pending and not receiver.sack_due
    receiver.on_data(_middle(3, rkey), 100, False, replies)
    assert receiver.sack_due and replies == []  # due: the caller sends it after its batch


def test_out_of_order_arrival_alone_does_not_make_a_sack_due():
    receiver, rkey, _ = _receiver(sack_every=4)
    replies: list[Packet] = []
    for psn in (2, 0, 5):  # PSNs 1, 3 and 4 still on their way
        receiver.on_data(_middle(psn, rkey), 100, False, replies)
    assert receiver.sack_pending and not receiver.sack_due and replies == []


def test_a_packet_carrying_an_ack_request_makes_the_sack_due():
    receiver, rkey, _ = _receiver(sack_every=8)
    replies: list[Packet] = []
    receiver.on_data(_middle(0, rkey), 100, False, replies)
    receiver.on_data(_middle(1, rkey, ack_req=True), 101, False, replies)
    assert receiver.sack_due
    receiver.flush_sack(replies)
    receiver.on_data(_middle(2, rkey), 102, False, replies)
    assert not receiver.sack_due  # the request was answered with the SACK that went out


def test_a_completed_messages_ack_waits_behind_the_pending_sack():
    receiver, rkey, _ = _receiver(sack_every=8)
    replies: list[Packet] = []
    receiver.on_data(_whole(0, 0, rkey), 100, False, replies)
    assert receiver.sack_pending and not receiver.sack_due and replies == []
    receiver.flush_sack(replies)
    assert [type(r) for r in replies] == [SackPacket, AckPacket]


def test_every_sack_and_message_ack_sent_is_counted():
    receiver, rkey, counters = _receiver(sack_every=8)
    replies: list[Packet] = []
    receiver.on_data(_whole(0, 0, rkey), 100, False, replies)
    receiver.on_data(_middle(1, rkey), 101, True, replies)  # CE: answered at once
    receiver.flush_sack(replies)
    assert counters.acks_sent == len(replies) == 3


def test_sack_every_above_the_coalescing_cap_is_the_cap():
    receiver, rkey, _ = _receiver(sack_every=8, sack_coalesce_max=2)
    replies: list[Packet] = []
    receiver.on_data(_middle(0, rkey), 100, False, replies)
    receiver.on_data(_middle(1, rkey), 100, False, replies)
    assert len(replies) == 1 and not receiver.sack_pending


# --- the connection: holding a SACK that is not due -------------------------------------------


def _link(**changes: object) -> Loopback:
    return Loopback.create(replace(MrcConfig(ev_set_size=8), **changes))  # type: ignore[arg-type]


def _sent_by_b(link: Loopback) -> list[Packet]:
    return [f.packet() for f in link.in_flight if f.source is link.b]


def _deliver_data(link: Loopback, at: float, data: list) -> None:
    """Hand ``data`` (flights of a's) to b at ``at`` and collect b's output then."""
    link.now = at
    for flight in data:
        link.b.receive_datagram(to_incoming(flight.datagram), at)
    link.in_flight = [f for f in link.in_flight if f not in data]
    link.collect()


#: The receiving connection's first PSN (``Loopback``).
_FIRST_PSN = 5


def _learn_gaps(link: Loopback, data: list, count: int, gap: float) -> float:
    """Deliver ``count`` of ``data`` ``gap`` apart (the receiver learns the gap); the time
    of the last."""
    at = 0.0
    for i in range(count):
        at = (i + 1) * gap
        _deliver_data(link, at, data[i : i + 1])
    return at


def test_a_connections_first_packets_are_answered_at_once_until_it_knows_their_pace():
    link = _link(sack_every=8)
    link.post(bytes(20 * 1024))
    data = [f for f in link.in_flight if f.source is link.a]
    _deliver_data(link, 1e-3, data[:1])
    [sack] = [p for p in _sent_by_b(link) if isinstance(p, SackPacket)]
    assert sack.cack_psn == _FIRST_PSN + 1


def test_a_sack_not_due_is_held_until_the_peer_goes_quiet_for_three_of_its_gaps():
    link = _link(sack_every=64, sack_delay=50e-3)
    link.post(bytes(20 * 1024))
    data = [f for f in link.in_flight if f.source is link.a]
    last = _learn_gaps(link, data, 12, gap=1e-3)
    link.in_flight = [f for f in link.in_flight if f.source is not link.b]
    _deliver_data(link, last + 1e-3, data[12:13])
    assert not any(isinstance(p, SackPacket) for p in _sent_by_b(link))  # held
    deadline = link.b.next_timer()
    assert deadline is not None and last + 1e-3 < deadline <= last + 1e-3 + 3 * 1e-3
    link.now = deadline
    link.b.handle_timer(deadline)
    link.collect()
    [sack] = [p for p in _sent_by_b(link) if isinstance(p, SackPacket)]
    assert sack.cack_psn == _FIRST_PSN + 13  # every packet, the held one with them


def test_a_sack_is_held_no_longer_than_sack_delay_however_slowly_packets_come():
    link = _link(sack_every=64, sack_delay=2e-3, sack_quiet_gaps=1000.0)
    link.post(bytes(20 * 1024))
    data = [f for f in link.in_flight if f.source is link.a]
    answered = [_FIRST_PSN]
    for i in range(13):  # one packet a millisecond
        _deliver_data(link, (i + 1) * 1e-3, data[i : i + 1])
        answered += [p.cack_psn for p in _sent_by_b(link) if isinstance(p, SackPacket)]
        link.in_flight = [f for f in link.in_flight if f.source is not link.b]
    groups = [b - a for a, b in itertools.pairwise(answered)]
    # The first answered at once; then the oldest waits 2 ms: three arrivals a SACK.
    assert groups == [1, 3, 3, 3, 3]


def test_sack_every_packets_are_answered_when_the_batch_is_handed_over():
    link = _link(sack_every=4, sack_quiet_gaps=1000.0)
    link.post(bytes(20 * 1024))
    data = [f for f in link.in_flight if f.source is link.a]
    _learn_gaps(link, data, 4, gap=1e-3)  # the first one answered at once, three wait
    link.in_flight = [f for f in link.in_flight if f.source is not link.b]
    _deliver_data(link, 10e-3, data[4:5])
    [sack] = [p for p in _sent_by_b(link) if isinstance(p, SackPacket)]
    assert sack.cack_psn == _FIRST_PSN + 5


# --- the sender: asking for an ACK ------------------------------------------------------------


def _asks_for_ack(flight: Flight) -> bool:
    packet = flight.packet()
    return isinstance(packet, DataPacket) and packet.ack_req


def _answer_a(link: Loopback) -> list[Flight]:
    """Hand b's answers to a, collect what a sends then: a's new data flights."""
    answers = [f for f in link.in_flight if f.source is link.b]
    link.in_flight = [f for f in link.in_flight if f.source is not link.b]
    link.now += 1e-4
    for flight in answers:
        link.a.receive_datagram(to_incoming(flight.datagram), link.now)
    before = list(link.in_flight)
    link.collect()
    return [f for f in link.in_flight if f.source is link.a and f not in before]


def test_a_blocked_sender_asks_on_the_last_packet_and_not_again_until_it_is_answered():
    link = _link(initial_window=4 * 1024, min_window=1024, sack_every=64)
    link.post(bytes(16 * 1024))
    first = [f for f in link.in_flight if f.source is link.a]
    assert [_asks_for_ack(f) for f in first] == [False, False, False, True]  # window full
    # The first packet is answered at once (the receiver does not know the pace yet): the
    # window opens (and grows), and the packets sent then do not ask, the one that did
    # still being on its way.
    _deliver_data(link, 1e-3, first[:1])
    second = _answer_a(link)
    assert second and not any(map(_asks_for_ack, second))
    # The packet that asked arrives and is answered: blocked again, the sender asks again.
    _deliver_data(link, 1.2e-3, first[1:])
    third = _answer_a(link)
    assert third and _asks_for_ack(third[-1]) and not any(map(_asks_for_ack, third[:-1]))


def test_the_last_packet_before_the_sender_runs_out_of_work_asks():
    link = _link()
    link.post(bytes(3 * 1024))
    assert [_asks_for_ack(f) for f in link.in_flight] == [False, False, True]


def test_messages_sent_together_ask_once_at_the_end_of_the_burst():
    link = _link()
    for offset in range(0, 4 * 2048, 2048):  # four messages of two packets
        link.a.post_write(link.qp_a, bytes(2048), link.va + offset, link.rkey)
    link.collect()
    asks = [_asks_for_ack(f) for f in link.in_flight if f.source is link.a]
    assert asks == [False] * 7 + [True]


def test_the_codec_carries_the_ack_request_to_the_receive_path():
    link = _link()
    link.post(bytes(1024))
    [flight] = [f for f in link.in_flight if f.source is link.a]
    d = flight.datagram
    assert decode(d.payload, d.ip, d.src_port, d.dst_port).ack_req  # type: ignore[union-attr]
