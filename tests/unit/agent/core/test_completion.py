"""Completion: a message is done when its ACK arrives, and a missing ACK is asked for again.

The receiver remembers the outcomes of the last ``completion_history`` messages it completed,
so the sender keeps its MSNs within ``max_unconfirmed_messages`` of its oldest unconfirmed
message (the RQMSN): the receiver can then always repeat the ACK a sender asks for. A request
for an ACK that no EV could carry (the connection's only EV on probation) is not an attempt
and does not back off."""

from __future__ import annotations

import random

from agent.core import MessageAcked, MrcConfig
from agent.core.packets import AckPacket, EndpointMessage
from agent.sim import LinkConfig, build_pair
from tests.unit.agent.core.loopback import Flight, Loopback


def _acked(link: Loopback) -> list[int]:
    return [e.msn for e in link.events_a if isinstance(e, MessageAcked)]


def test_a_message_missing_its_ack_holds_back_later_messages_before_the_receiver_forgets_it():
    config = MrcConfig(ev_set_size=8, max_unconfirmed_messages=2, completion_history=4)
    link = Loopback.create(config)
    first = link.post(b"first")

    def first_ack(flight: Flight) -> bool:
        packet = flight.packet()
        return isinstance(packet, AckPacket) and packet.msn == first

    posted = [first]
    for _ in range(12):  # three times the outcomes the receiver remembers
        if link.a.can_post(link.qp_a):
            posted.append(link.post(b"later"))
        link.run(2e-3, drop=first_ack)
    # The second message completes, but a third would put the first max_unconfirmed_messages
    # MSNs back, however few messages are unconfirmed.
    assert len(posted) == 2 and _acked(link) == [posted[1]]
    assert not link.a.can_post(link.qp_a)
    link.run(50e-3)
    assert sorted(_acked(link)) == posted  # the receiver still knew the first one's outcome
    assert link.a.can_post(link.qp_a)


def test_an_ack_request_no_ev_could_carry_is_not_an_attempt_and_does_not_back_off():
    # One EV, as the single-path transport has; probe_share 1 so that the stand-in is
    # probed every round once probes get through again, whatever the budget.
    config = MrcConfig(ev_set_size=1, probe_share=1.0, tail_loss_probe=False)
    link = Loopback.create(config)
    link.post(b"x" * 3000)
    link.exchange()  # the data reaches the receiver
    link.exchange(drop=lambda f: isinstance(f.packet(), AckPacket))  # SACK in, ACK lost
    assert _acked(link) == []
    plane, ev, _state = link.a.ev_states(link.qp_a)[0]
    # The lone EV is retired: its stand-in needs an answered probe before it carries
    # anything, and for half a second no probe is answered.
    link.a.retire_ev(link.qp_a, plane, ev, link.now)
    link.collect()
    restored = link.now + 0.5
    while link.now < restored:
        link.exchange(drop=lambda f: isinstance(f.packet(), EndpointMessage))
    assert _acked(link) == []
    assert link.a.connection_stats(link.qp_a).completion_probes == 0  # none could go out
    # Probes are answered again: the stand-in is admitted within a round or two, and the
    # request goes out at its first, unbacked-off timeout. Counting the half second of
    # turns without an EV as attempts had backed it off to hundreds of milliseconds.
    link.run(10e-3)
    assert len(_acked(link)) == 1
    assert link.a.connection_stats(link.qp_a).completion_probes == 1


def test_one_ev_under_loss_confirms_every_message_with_a_short_completion_history():
    # The single-path transport (one EV, retired at every loss) over four lossy paths, with
    # the receiver remembering few outcomes: many ACKs go missing and are asked for again
    # while later messages complete. Every message must be confirmed, none left waiting.
    link = LinkConfig(delay=20e-6, loss=0.05)
    config = MrcConfig(ev_set_size=1, max_unconfirmed_messages=8, completion_history=16)
    testbed = build_pair([[link] * 4], config=config, seed=3, region_size=2048)
    data = random.Random(3).randbytes(2048)
    endpoint = testbed.sender.endpoint
    qp = testbed.send_qp
    count = 400
    posted = 0
    acked = 0
    seen = 0

    def progress() -> bool:
        nonlocal acked, seen
        events = testbed.sender.events
        for _t, event in events[seen:]:
            acked += isinstance(event, MessageAcked)
        seen = len(events)
        return acked >= count or testbed.now > 5.0 or (posted < count and endpoint.can_post(qp))

    while acked < count and testbed.now <= 5.0 and not testbed.failed():
        while posted < count and endpoint.can_post(qp):
            endpoint.post_write(qp, data, testbed.region.va, testbed.region.rkey)
            posted += 1
        testbed.sender.pump()
        testbed.run(stop=progress)
    assert not testbed.failed()
    assert acked == count
    # ACKs did go missing and were asked for again, over and over the history's length.
    assert endpoint.connection_stats(qp).completion_probes > 0
