"""Reliability between two endpoints, packet by packet: placement and confirmation, duplicates,
NACK-driven retransmission of trimmed packets, SACK-gap loss detection, tail probes, RTO
backoff, lost completion ACKs, refused writes, unreachable peers and port-state updates."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from agent.core import (
    ConnectionFailed,
    DropReason,
    IncomingDatagram,
    MessageAcked,
    MessageFailed,
    MessageReceived,
    MrcConfig,
    PeerPlaneStateChanged,
    RetransmitCause,
    WriteRejected,
)
from agent.core.codec import trimmed_length
from agent.core.packets import AckPacket, DataPacket, NackPacket, ReliabilityProbe, SackPacket
from tests.unit.agent.core.loopback import ONE_WAY, Flight, Loopback
from wire.constants import ECN_CE, DscpClass, EvState

DATA = bytes(random.Random(5).randbytes(5000))  # five packets of 1024 bytes, last one shorter


def _is_data(flight: Flight) -> bool:
    return isinstance(flight.packet(), DataPacket)


def _data_psns(flights: list[Flight]) -> list[int]:
    return [f.packet().psn for f in flights if isinstance(f.packet(), DataPacket)]


def _trim(flight: Flight, incoming: IncomingDatagram, dscp: int) -> IncomingDatagram:
    cut = trimmed_length(incoming.payload)
    assert cut is not None
    return replace(incoming, payload=incoming.payload[:cut], dscp=dscp)


def test_a_write_is_placed_reported_and_confirmed_once():
    link = Loopback.create()
    msn = link.post(DATA, offset=100, immediate=0xABCD)
    link.run(1e-3)
    received = [e for e in link.events_b if isinstance(e, MessageReceived)]
    assert received == [MessageReceived(link.qp_b, msn, link.rkey, link.va + 100, 5000, 0xABCD)]
    assert link.b.memory.read(link.rkey, link.va + 100, 5000) == DATA
    assert [e for e in link.events_a if isinstance(e, MessageAcked)] == [
        MessageAcked(link.qp_a, msn, 5000)
    ]
    stats = link.a.connection_stats(link.qp_a)
    assert stats.data_packets_sent == 5 and stats.total_retransmits == 0


def test_data_leaves_on_a_different_ev_per_packet_with_the_data_class_and_ect():
    link = Loopback.create()
    link.post(DATA)
    data = [f.datagram for f in link.in_flight if _is_data(f)]
    assert len({d.src_port for d in data}) == 5
    assert {d.dscp for d in data} == {DscpClass.TRIMMABLE}
    assert {d.ecn for d in data} == {2}


def test_control_answers_go_back_on_the_ev_of_the_packet_they_answer():
    link = Loopback.create()
    link.post(DATA[:100])
    data = link.in_flight[0].datagram
    link.exchange()
    answers = [f.datagram for f in link.in_flight if f.source is link.b]
    assert answers and all(d.src_port == data.src_port for d in answers)
    assert {d.dscp for d in answers} == {DscpClass.CONTROL}


def test_duplicated_packets_are_placed_and_reported_once():
    link = Loopback.create()
    link.post(DATA)
    link.in_flight = link.in_flight + list(link.in_flight)
    link.run(1e-3)
    assert sum(isinstance(e, MessageReceived) for e in link.events_b) == 1
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1
    assert link.b.connection_stats(link.qp_b).duplicates_received == 5


def test_a_trimmed_packet_is_nacked_and_resent_at_once_on_the_retransmit_class():
    link = Loopback.create()
    link.post(DATA)
    victim = link.in_flight[2]
    link.exchange(
        rewrite=lambda f, d: _trim(f, d, DscpClass.TRIMMED) if f is victim else d,
    )
    nacks = [f.packet() for f in link.in_flight if isinstance(f.packet(), NackPacket)]
    assert [n.nack_psn for n in nacks] == [victim.packet().psn]
    link.exchange()  # the NACK reaches the sender, which resends in the same instant
    resent = [f for f in link.in_flight if _is_data(f)]
    assert [f.packet().psn for f in resent] == [victim.packet().psn]
    assert resent[0].packet().retransmit and resent[0].datagram.dscp == DscpClass.TRIMMABLE_RETX
    link.run(1e-3)
    stats = link.a.connection_stats(link.qp_a)
    assert stats.retransmits[RetransmitCause.NACK] == 1 and stats.trims_seen == 1
    assert link.b.memory.read(link.rkey, link.va, 5000) == DATA


def _answers_other_than_nacks(flight: Flight) -> bool:
    return isinstance(flight.packet(), SackPacket | AckPacket)


def test_a_fabric_trim_skips_the_ev_once_but_a_last_hop_trim_does_not():
    for dscp, skipped in ((DscpClass.TRIMMED, True), (DscpClass.TRIMMED_LASTHOP, False)):
        link = Loopback.create()
        link.post(DATA)
        victim = link.in_flight[0]
        link.exchange(rewrite=lambda f, d, v=victim, c=dscp: _trim(f, d, c) if f is v else d)
        link.exchange(drop=_answers_other_than_nacks)
        states = {r.ev: r.state for r in link.a.connection_stats(link.qp_a).evs}
        assert (states[victim.datagram.ev] is EvState.SKIP) is skipped


def test_a_silent_loss_is_found_by_later_sacks_and_retires_its_ev():
    link = Loopback.create()
    link.post(DATA)
    victim = link.in_flight[1]
    link.exchange(drop=lambda f: f is victim)
    link.run(1e-3)
    stats = link.a.connection_stats(link.qp_a)
    assert stats.retransmits[RetransmitCause.SACK_GAP] == 1
    assert stats.timeouts == 0
    states = {r.ev: r.state for r in stats.evs}
    assert states[victim.datagram.ev] is EvState.ASSUMED_BAD
    assert any(isinstance(e, MessageAcked) for e in link.events_a)


def test_a_lost_tail_is_found_by_a_reliability_probe_before_the_rto():
    config = MrcConfig(ev_set_size=8, rto_min=0.05, rto_initial=0.05)
    link = Loopback.create(config)
    link.post(DATA[:1000])
    link.run(1e-3)  # first message gives an RTT sample
    link.post(DATA, offset=8192)
    tail = link.in_flight[-1]
    link.exchange(drop=lambda f: f is tail)
    link.run(2e-3)
    stats = link.a.connection_stats(link.qp_a)
    assert stats.tail_probes >= 1
    assert stats.retransmits[RetransmitCause.SACK_GAP] == 1 and stats.timeouts == 0
    assert link.now < 0.05
    assert any(isinstance(f.packet(), ReliabilityProbe) for f in link.delivered)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 2


def test_the_rto_backs_off_exponentially_while_nothing_gets_through():
    config = MrcConfig(
        ev_set_size=8, rto_initial=1e-3, rto_min=1e-3, tail_loss_probe=False, peer_timeout=10.0
    )
    link = Loopback.create(config)
    link.post(DATA[:100])
    link.in_flight.clear()  # the only packet is lost
    send_times = [0.0]
    while len(send_times) < 4 and link.now < 1.0:
        link.idle_until_timer()  # RTOs, and EV probe rounds in between
        if any(_is_data(f) for f in link.in_flight):
            send_times.append(link.now)
        link.in_flight.clear()
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(send_times)]
    assert gaps[:3] == [0.001, 0.002, 0.004]
    assert link.a.connection_stats(link.qp_a).timeouts >= 3


def test_the_rto_backoff_ends_once_packets_get_through_again():
    config = MrcConfig(ev_set_size=8, rto_initial=1e-3, rto_min=1e-3, tail_loss_probe=False)
    link = Loopback.create(config)
    link.post(DATA[:100])
    while link.a.connection_stats(link.qp_a).timeouts < 2:
        link.in_flight.clear()
        link.idle_until_timer()
    assert link.a.connection_stats(link.qp_a).rto == 4e-3
    link.run(10e-3)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1
    stats = link.a.connection_stats(link.qp_a)
    assert stats.retransmits[RetransmitCause.TIMEOUT] == 2
    assert stats.rto == 1e-3


def test_a_lost_completion_ack_is_asked_for_again_and_confirmed_once():
    link = Loopback.create()
    link.post(DATA)
    link.exchange()
    link.exchange(drop=lambda f: isinstance(f.packet(), AckPacket))
    assert not any(isinstance(e, MessageAcked) for e in link.events_a)
    link.run(5e-3)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1
    assert link.a.connection_stats(link.qp_a).completion_probes >= 1
    assert sum(isinstance(e, MessageReceived) for e in link.events_b) == 1


def test_a_write_with_a_wrong_key_is_refused_counted_and_failed_at_the_sender():
    link = Loopback.create()
    msn = link.a.post_write(link.qp_a, DATA, link.va, link.rkey ^ 0x5A5A)
    link.collect()
    link.run(1e-3)
    assert [e for e in link.events_b if isinstance(e, WriteRejected)] == [
        WriteRejected(link.qp_b, msn, DropReason.BAD_RKEY.value)
    ]
    assert link.b.stats.drops[DropReason.BAD_RKEY] == 5
    failed = [e for e in link.events_a if isinstance(e, MessageFailed)]
    assert [e.msn for e in failed] == [msn] and "REMOTE_ACCESS" in failed[0].reason
    assert not any(isinstance(e, MessageReceived) for e in link.events_b)


def test_a_write_past_the_end_of_the_region_is_refused():
    link = Loopback.create()
    region_end = link.va + (1 << 20)
    link.a.post_write(link.qp_a, DATA, region_end - 100, link.rkey)
    link.collect()
    link.run(1e-3)
    assert link.b.stats.drops[DropReason.OUT_OF_BOUNDS] >= 1
    assert any(isinstance(e, MessageFailed) for e in link.events_a)


def test_a_silent_peer_fails_the_connection_after_the_peer_timeout():
    config = MrcConfig(ev_set_size=8, peer_timeout=0.05, rto_max=0.01)
    link = Loopback.create(config)
    msn = link.post(DATA)
    while link.now < 0.2 and not any(isinstance(e, ConnectionFailed) for e in link.events_a):
        link.in_flight.clear()
        link.idle_until_timer()
    failed = [e for e in link.events_a if isinstance(e, ConnectionFailed)]
    assert failed and "unreachable" in failed[0].reason
    assert 0.05 <= link.now < 0.07
    assert MessageFailed(link.qp_a, msn, failed[0].reason) in link.events_a


def test_a_timeouts_resend_takes_another_path_than_the_evs_answered_before_a_path_died():
    # Eight EVs, every other one on a path that is about to die. Their packets are answered
    # first, so they head the answered-EV list that new data draws from; then the path dies.
    # The next packet goes down it (the list's head) and times out. Its resend must not take
    # the list's next EV, dead too (each backed-off resend then died the same way, and a real
    # connection fell silent for its whole peer timeout), but the slot rotation's.
    config = MrcConfig(ev_set_size=8, rto_initial=1e-3, rto_min=1e-3, tail_loss_probe=False)
    link = Loopback.create(config)
    link.post(bytes(8 * 1024))  # eight packets, one per EV
    first = [f for f in link.in_flight if _is_data(f)]
    assert len({f.datagram.ev for f in first}) == 8
    dead = {f.datagram.ev for f in first[::2]}
    later = [f for f in link.in_flight if f.datagram.ev not in dead]
    link.in_flight = [f for f in link.in_flight if f.datagram.ev in dead]
    link.exchange()  # the packets on the doomed path arrive and are answered first
    link.in_flight.extend(later)
    link.run(1e-3)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1

    def on_dead_path(flight: Flight) -> bool:
        return flight.datagram.ev in dead

    link.post(DATA[:100], offset=8192)
    assert [f.datagram.ev in dead for f in link.in_flight if _is_data(f)] == [True]
    resent: list[Flight] = []
    while not resent and link.now < 20e-3:
        link.exchange(drop=on_dead_path)
        if link.a.connection_stats(link.qp_a).timeouts:
            resent = [f for f in link.in_flight if f.source is link.a and _is_data(f)]
    assert len(resent) == 1 and resent[0].datagram.ev not in dead
    link.run(20e-3, drop=on_dead_path)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 2
    assert link.a.connection_stats(link.qp_a).timeouts == 1


def test_ecn_marks_are_echoed_and_steer_away_from_the_marked_ev():
    link = Loopback.create()
    link.post(DATA)
    marked = link.in_flight[0]
    link.exchange(rewrite=lambda f, d: replace(d, ecn=ECN_CE) if f is marked else d)
    sacks = [f.packet() for f in link.in_flight if isinstance(f.packet(), SackPacket)]
    assert sum(s.ecn_echo for s in sacks) == 1
    link.exchange()
    stats = link.a.connection_stats(link.qp_a)
    assert stats.ecn_echoes == 1
    assert link.b.connection_stats(link.qp_b).ecn_marks_received == 1
    states = {r.ev: r.state for r in stats.evs}
    assert states[marked.datagram.ev] is EvState.SKIP


def test_a_port_going_down_is_announced_and_the_peer_stops_using_that_plane():
    link = Loopback.create(MrcConfig(ev_set_size=8), planes=2)
    link.b.set_plane_up(1, False)
    link.collect()
    link.run(0.5e-3)
    assert PeerPlaneStateChanged(link.qp_a, 1, False) in link.events_a
    link.post(DATA * 2)
    planes = {f.datagram.plane for f in link.in_flight if _is_data(f)}
    assert planes == {0}
    link.run(1e-3)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1


def test_a_denied_ev_carries_no_data():
    link = Loopback.create()
    first = link.a.connection_stats(link.qp_a).evs[0]
    link.a.deny_ev(link.qp_a, first.plane, first.ev, link.now)
    link.post(DATA * 3)
    link.run(2e-3)
    data = [f for f in link.delivered if _is_data(f)]
    assert data  # the message went: a check of the EVs it used means something
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 1
    assert all(f.datagram.ev != first.ev for f in data)


# --- spurious losses: reordering taken for loss ----------------------------------------------


def _hold_back_until_resent(link: Loopback) -> tuple[Flight, Flight]:
    """Hold one data packet back while the rest of the message is delivered, until the sender
    has declared it lost from the SACK gap and resent it; returns (original, resend)."""
    for _ in range(20):  # steady RTT samples: the window is measured (min_rtt / 4), not guessed
        link.post(DATA[:1000])
        link.run(1e-3)
    link.post(DATA, offset=8192)
    victim = link.in_flight[1]
    held = victim.packet().psn
    link.exchange(drop=lambda f: f is victim)
    for _ in range(200):
        resends = [f for f in link.in_flight if _is_data(f) and f.packet().psn == held]
        if resends:
            return victim, resends[0]
        link.exchange()
    raise AssertionError("the held packet was never resent")


def _deliver(link: Loopback, flights: list[Flight]) -> None:
    """Deliver exactly ``flights``, in this order, then let the answers flow."""
    others = [f for f in link.in_flight if f not in flights]
    link.in_flight = list(flights)
    link.exchange()
    link.in_flight.extend(f for f in others if not _is_data(f))
    link.run(1e-3)


def test_a_late_original_answered_after_its_resend_proves_the_loss_spurious():
    """The resend arrives first; the original, late, is a duplicate the receiver still answers
    with its own timestamp (a D-SACK): the loss was reordering, so the window widens."""
    link = Loopback.create()
    original, resend = _hold_back_until_resent(link)
    before = link.a.connection_stats(link.qp_a)
    assert before.retransmits[RetransmitCause.SACK_GAP] == 1 and before.spurious_losses == 0
    _deliver(link, [resend, original])
    after = link.a.connection_stats(link.qp_a)
    assert after.spurious_losses == 1
    assert (before.reorder_multiplier, after.reorder_multiplier) == (1, 2)
    assert link.b.connection_stats(link.qp_b).duplicates_received == 1
    assert after.evs_reinstated == 1


def test_an_original_answered_before_its_resend_proves_the_loss_spurious():
    link = Loopback.create()
    original, _resend = _hold_back_until_resent(link)
    before = link.a.connection_stats(link.qp_a)
    _deliver(link, [original])
    after = link.a.connection_stats(link.qp_a)
    assert after.spurious_losses == 1
    assert (before.reorder_multiplier, after.reorder_multiplier) == (1, 2)
    assert sum(isinstance(e, MessageAcked) for e in link.events_a) == 21


def _ev_state(link: Loopback, ev: int) -> EvState:
    return {r.ev: r.state for r in link.a.connection_stats(link.qp_a).evs}[ev]


def test_the_ev_a_disproved_loss_retired_takes_its_slot_back_at_once():
    """Reordering is not a broken path: the EV comes back without waiting for probes."""
    link = Loopback.create()
    original, _resend = _hold_back_until_resent(link)
    assert _ev_state(link, original.datagram.ev) is EvState.ASSUMED_BAD
    probes_before = link.a.connection_stats(link.qp_a).ev_probes_sent
    _deliver(link, [original])
    after = link.a.connection_stats(link.qp_a)
    assert _ev_state(link, original.datagram.ev) is EvState.GOOD
    assert after.evs_reinstated == 1
    assert after.ev_probes_sent - probes_before < 3  # not brought back by three probes


def test_a_resend_answered_twice_disproves_nothing():
    """Only an answer to the copy declared lost shows the loss was not one."""
    link = Loopback.create()
    original, resend = _hold_back_until_resent(link)
    before = link.a.connection_stats(link.qp_a)
    _deliver(link, [resend, resend])
    after = link.a.connection_stats(link.qp_a)
    assert after.spurious_losses == 0
    assert (before.reorder_multiplier, after.reorder_multiplier) == (1, 1)
    assert after.evs_reinstated == 0
    assert _ev_state(link, original.datagram.ev) is EvState.ASSUMED_BAD


# --- spurious timeouts: a delayed flight taken for a lost one -------------------------------


def _rto_over_a_held_flight(link: Loopback) -> tuple[list[Flight], int]:
    """Send a message whose packets are held back (nothing answered) until the RTO fires;
    returns the held originals and the window before the timeout."""
    for _ in range(5):
        link.post(DATA[:1000])
        link.run(1e-3)
    link.post(DATA, offset=8192)
    window = link.a.connection_stats(link.qp_a).cwnd
    held, link.in_flight = list(link.in_flight), []
    while link.a.connection_stats(link.qp_a).timeouts == 0:
        link.idle_until_timer()
        link.in_flight = [f for f in link.in_flight if f.source is not link.a]
    return held, window


def test_originals_answered_right_after_an_rto_undo_its_window_cut():
    """They were only delayed (a queue, a scheduler): the answer to the timed-out packet comes
    sooner after its resend than any round trip, so it answers the original, and the window
    the timeout halved is given back (RFC 4015)."""
    link = Loopback.create()
    held, window = _rto_over_a_held_flight(link)
    assert link.a.connection_stats(link.qp_a).cwnd < window
    link.in_flight = held
    link.exchange(delay=ONE_WAY / 4)  # the originals were queued just short of the receiver
    link.exchange(delay=ONE_WAY / 4)
    stats = link.a.connection_stats(link.qp_a)
    assert stats.spurious_timeouts == 1
    assert stats.cwnd >= window


def test_a_resend_answered_after_a_round_trip_leaves_the_timeout_standing():
    link = Loopback.create()
    _held, _window = _rto_over_a_held_flight(link)
    link.run(1e-3)  # the originals are lost; the resends go through at the normal delay
    stats = link.a.connection_stats(link.qp_a)
    assert stats.spurious_timeouts == 0
    assert stats.timeouts >= 1


def _cwnd(link: Loopback) -> int:
    return link.a.connection_stats(link.qp_a).cwnd


def test_originals_answered_a_round_trip_after_the_resend_left_still_undo_the_cut():
    """The timed-out packet's own answer cannot tell (its resend left at once, so the
    original's answer comes as late as the resend's would); the rest of the flight, first
    transmissions sent before the timeout and answered after it, shows the flight was late,
    not lost (RFC 5682's F-RTO): the cut is given back."""
    link = Loopback.create()
    held, window = _rto_over_a_held_flight(link)  # the resend is lost
    assert _cwnd(link) < window
    link.now += 4 * ONE_WAY  # well over the minimum RTT after the resend left
    link.in_flight = held
    link.exchange()
    link.exchange()
    stats = link.a.connection_stats(link.qp_a)
    assert stats.spurious_timeouts == 1
    assert stats.cwnd >= window


def test_a_run_of_timeouts_cuts_the_window_once_and_gives_it_all_back_when_spurious():
    link = Loopback.create()
    held, window = _rto_over_a_held_flight(link)
    cut = _cwnd(link)
    while link.a.connection_stats(link.qp_a).timeouts < 3:  # backed off, nothing answered
        link.idle_until_timer()
        link.in_flight = [f for f in link.in_flight if f.source is not link.a]
    assert _cwnd(link) == cut < window
    link.in_flight = held
    link.exchange()
    link.exchange()
    stats = link.a.connection_stats(link.qp_a)
    assert stats.spurious_timeouts == 1
    assert stats.cwnd >= window


def test_a_lost_completion_ack_is_asked_for_again_after_later_writes_moved_far_past_it():
    # The completion probes of the first message are lost while later writes move the
    # receiver's cumulative PSN more than a SACK can point back (2**15 PSNs): the probe that
    # gets through must still be answered with the ACK, or the message is never confirmed.
    link = Loopback.create()
    first = link.post(DATA)
    link.exchange()

    def lost(flight: Flight) -> bool:
        packet = flight.packet()
        return (isinstance(packet, AckPacket) and packet.msn == first) or (
            isinstance(packet, DataPacket) and packet.msn == first and packet.retransmit
        )

    link.exchange(drop=lost)
    later = bytes(64 * 1024)  # 64 packets each
    while link.b.connection_stats(link.qp_b).data_packets_received < 0x8000 + 256:
        stats = link.a.connection_stats(link.qp_a)
        if stats.messages_posted - stats.messages_acked < 4:  # the first stays unconfirmed
            link.post(later)
        link.exchange(drop=lost)
    link.run(5e-3, drop=lost)
    assert MessageAcked(link.qp_a, first, len(DATA)) not in link.events_a
    link.run(0.5)
    assert MessageAcked(link.qp_a, first, len(DATA)) in link.events_a
    assert not any(isinstance(e, ConnectionFailed) for e in link.events_a)
