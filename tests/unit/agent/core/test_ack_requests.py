"""ACK requests and the SACK delay: how a connection keeps its acknowledgements few.

Specification: a sender sets the ACK request bit on a message's last packet, on every resend,
on every ``window / ack_requests_per_window`` packets (every packet among a connection's first
``quick_ack_packets``), and on the last packet it sends before
its window holds the rest back. A receiver holds the SACK of in-order packets without the bit
until one with it arrives, and at the latest ``sack_delay`` after the first (the connection's
timer fires then).
"""

from __future__ import annotations

import random

from agent.core import MrcConfig
from agent.core.packets import DataPacket, SackPacket
from tests.unit.agent.core.loopback import Flight, Loopback

PAYLOAD = 1024


def _data(flights: list[Flight]) -> list[DataPacket]:
    return [p for f in flights if isinstance(p := f.packet(), DataPacket)]


def _sacks(flights: list[Flight]) -> list[SackPacket]:
    return [p for f in flights if isinstance(p := f.packet(), SackPacket)]


def test_the_sender_asks_a_few_times_a_window_and_on_a_messages_last_packet():
    # A window of 32 packets, four requests a window: every 8th packet, and the last one.
    config = MrcConfig(
        ev_set_size=8, initial_window=32 * PAYLOAD, congestion_control="fixed", quick_ack_packets=0
    )
    link = Loopback.create(config)
    link.post(random.Random(1).randbytes(20 * PAYLOAD))
    sent = _data(link.in_flight)
    assert len(sent) == 20
    assert [i for i, p in enumerate(sent) if p.ack_req] == [7, 15, 19]


def test_the_last_packet_before_the_window_stalls_asks_for_its_ack():
    # Eleven packets of window, two requests a window: every 5th, then the 11th as the last.
    config = MrcConfig(
        ev_set_size=8,
        initial_window=11 * PAYLOAD,
        congestion_control="fixed",
        quick_ack_packets=0,
        ack_requests_per_window=2,
    )
    link = Loopback.create(config)
    link.post(random.Random(2).randbytes(40 * PAYLOAD))
    sent = _data(link.in_flight)
    assert len(sent) == 11  # the window's worth
    # The 11th: otherwise the last one would wait out the receiver's delay.
    assert [i for i, p in enumerate(sent) if p.ack_req] == [4, 9, 10]


def test_the_receiver_answers_an_ack_request_at_once_and_others_after_its_delay():
    config = MrcConfig(
        ev_set_size=8, initial_window=64 * PAYLOAD, congestion_control="fixed", quick_ack_packets=0
    )
    link = Loopback.create(config)
    link.post(random.Random(3).randbytes(20 * PAYLOAD))
    link.exchange()  # the 20 data packets arrive together: requests on the 16th and 20th
    sacks = _sacks(link.in_flight)
    assert len(sacks) == 2 and not link.b.next_timer()


def test_a_pending_sack_goes_out_when_its_delay_is_over():
    config = MrcConfig(
        ev_set_size=8,
        initial_window=64 * PAYLOAD,
        congestion_control="fixed",
        sack_delay=5e-3,
        quick_ack_packets=0,
    )
    link = Loopback.create(config)
    link.post(random.Random(4).randbytes(30 * PAYLOAD))
    # Deliver only the first three packets (no request among them): their SACK waits.
    first, rest = link.in_flight[:3], link.in_flight[3:]
    link.in_flight = first
    link.exchange()
    assert _sacks(link.in_flight) == []
    due = link.b.next_timer()
    assert due is not None and abs(due - (link.now + 5e-3)) < 1e-9
    link.in_flight = []
    link.now = due
    link.b.handle_timer(link.now)
    link.collect()
    [sack] = _sacks(link.in_flight)
    assert sack.cack_psn == 5 + 3  # the connection's first PSN is 5
    del rest


def test_every_resend_asks_for_its_ack():
    config = MrcConfig(
        ev_set_size=8, initial_window=64 * PAYLOAD, congestion_control="fixed", quick_ack_packets=0
    )
    link = Loopback.create(config)
    link.post(random.Random(5).randbytes(12 * PAYLOAD))
    lost = _data(link.in_flight)[2].psn
    link.exchange(drop=lambda f: isinstance(p := f.packet(), DataPacket) and p.psn == lost)
    for _ in range(400):
        resent = [p for p in _data(link.in_flight) if p.psn == lost]
        if resent:
            break
        link.exchange()
    assert resent and resent[0].ack_req and resent[0].retransmit


def test_a_connections_first_packets_each_ask_for_their_ack():
    config = MrcConfig(ev_set_size=8, initial_window=64 * PAYLOAD, quick_ack_packets=6)
    link = Loopback.create(config)
    link.post(random.Random(6).randbytes(20 * PAYLOAD))
    asking = [i for i, p in enumerate(_data(link.in_flight)) if p.ack_req]
    assert asking[:6] == [0, 1, 2, 3, 4, 5] and 6 not in asking
