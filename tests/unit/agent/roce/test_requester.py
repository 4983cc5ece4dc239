"""The requester, as a RoCE NIC's: writes cut into standard packets, completion by ACK,
go-back-N from a NAKed PSN, the local ACK timer with ``retry_cnt``, and the error state; and
as a modern NIC's: selective repeat and the adaptive timer."""

from __future__ import annotations

import dataclasses

import pytest

from agent.core.cc.dcqcn_law import ReactionPoint
from agent.core.connection import ConnectionClosed
from agent.core.drops import DropReason
from agent.core.events import ConnectionFailed, Event, MessageAcked, MessageFailed
from agent.core.messages import SendQueueFull
from agent.core.stats import RetransmitCause
from agent.roce.config import DcqcnParams, RoceConfig
from agent.roce.packets import RoceData
from agent.roce.requester import Requester
from wire.constants import AETH_CREDIT_INVALID, AethSyndrome, RoceOpcode

PMTU = 256
FIRST_PSN = 0xFFFFF0  # PSNs wrap past 2**24 within the first messages
ACK = AethSyndrome.ACK | AETH_CREDIT_INVALID
NAK_SEQ = AethSyndrome.NAK_PSN_SEQUENCE_ERROR
#: A line rate no test's packets can exceed: pacing stays out of the way unless tested.
FAST = DcqcnParams(line_rate=1e15, min_rate=1e3)


def make(**changes) -> tuple[Requester, list[Event]]:
    config = dataclasses.replace(RoceConfig(pmtu=PMTU, dcqcn=FAST), **changes)
    events: list[Event] = []
    requester = Requester(3, 8, FIRST_PSN, config, ReactionPoint(config.dcqcn.law()), events.append)
    return requester, events


def psn(index: int) -> int:
    return (FIRST_PSN + index) & 0xFFFFFF


def sent_psns(packets: list[RoceData]) -> list[int]:
    return [(p.psn - FIRST_PSN) & 0xFFFFFF for p in packets]


def test_a_write_is_cut_into_first_middle_last_with_reth_first_and_ackreq_last():
    requester, _ = make()
    data = bytes(range(256)) * 3 + b"tail"
    requester.post_write(data, 0x5000, 0x77, 0xABCD)
    packets = requester.next_packets(0.0, 100)
    assert [p.opcode for p in packets] == [
        RoceOpcode.RC_RDMA_WRITE_FIRST,
        RoceOpcode.RC_RDMA_WRITE_MIDDLE,
        RoceOpcode.RC_RDMA_WRITE_MIDDLE,
        RoceOpcode.RC_RDMA_WRITE_LAST_IMM,
    ]
    assert (packets[0].va, packets[0].rkey, packets[0].dma_length) == (0x5000, 0x77, len(data))
    assert all(p.va == p.rkey == p.dma_length == 0 for p in packets[1:])
    assert [p.ack_req for p in packets] == [False, False, False, True]
    assert packets[-1].immediate == 0xABCD and packets[-1].payload == b"tail"
    assert b"".join(p.payload for p in packets) == data
    assert [p.psn for p in packets] == [psn(i) for i in range(4)]
    assert {p.dest_qp for p in packets} == {8}


def test_short_and_empty_writes_are_one_only_packet():
    requester, _ = make()
    requester.post_write(b"abc", 0, 1, None)
    requester.post_write(b"", 0, 1, 5)
    packets = requester.next_packets(0.0, 10)
    assert [p.opcode for p in packets] == [
        RoceOpcode.RC_RDMA_WRITE_ONLY,
        RoceOpcode.RC_RDMA_WRITE_ONLY_IMM,
    ]
    assert packets[1].dma_length == 0 and packets[1].immediate == 5


def test_an_ack_completes_every_write_whose_last_packet_it_covers():
    requester, events = make()
    for _ in range(3):
        requester.post_write(bytes(2 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    assert requester.on_ack(ACK, psn(2), 0.001) is None  # in the middle of write 1
    assert events == [MessageAcked(3, 0, 2 * PMTU)]
    assert requester.on_ack(ACK, psn(5), 0.002) is None
    assert events[1:] == [MessageAcked(3, 1, 2 * PMTU), MessageAcked(3, 2, 2 * PMTU)]
    assert requester.outstanding_wqes == 0 and requester.unacked_packets == 0


def test_an_ack_for_a_packet_never_sent_is_dropped_as_unexpected():
    requester, events = make()
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    assert requester.on_ack(ACK, psn(1), 0.0) is DropReason.UNEXPECTED
    assert requester.on_ack(NAK_SEQ, psn(5), 0.0) is DropReason.UNEXPECTED
    assert events == []


def test_a_nak_sends_the_requester_back_to_the_naked_psn_and_acks_what_came_before():
    requester, events = make()
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    assert sent_psns(requester.next_packets(0.0, 100)) == list(range(8))
    assert requester.on_ack(NAK_SEQ, psn(5), 0.001) is None
    assert events == [MessageAcked(3, 0, 4 * PMTU)]  # PSNs 0-4 implicitly acknowledged
    resent = requester.next_packets(0.001, 100)
    assert sent_psns(resent) == [5, 6, 7]  # go-back-N: the NAKed PSN and all after it
    assert requester.counters.retransmits[RetransmitCause.NACK] == 3
    assert requester.counters.go_backs == 1


def test_a_second_nak_for_the_psn_being_resent_does_not_go_back_again():
    requester, _ = make()
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    requester.on_ack(NAK_SEQ, psn(2), 0.001)
    assert sent_psns(requester.next_packets(0.001, 2)) == [2, 3]
    requester.on_ack(NAK_SEQ, psn(2), 0.002)  # stale: sent before the resend got there
    assert sent_psns(requester.next_packets(0.002, 100)) == [4, 5, 6, 7]
    assert requester.counters.go_backs == 1 and requester.retries == 1


def test_originals_acknowledged_during_a_resend_are_not_resent():
    requester, _ = make()
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    requester.handle_timer(1.0)  # timeout: back to PSN 0
    assert sent_psns(requester.next_packets(1.0, 2)) == [0, 1]
    requester.on_ack(ACK, psn(5), 1.0)  # the first copies had arrived after all
    assert sent_psns(requester.next_packets(1.0, 100)) == [6, 7]


def test_the_local_ack_timeout_is_4096_ns_times_two_to_the_timeout():
    requester, _ = make(timeout=14)
    assert requester.next_timer() is None
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(10.0, 10)
    assert requester.next_timer() == pytest.approx(10.0 + 4.096e-6 * 2**14)
    assert pytest.approx(0.0671, abs=1e-4) == 4.096e-6 * 2**14
    requester.handle_timer(10.0 + 0.06)  # not yet
    assert requester.counters.timeouts == 0


def test_a_timeout_goes_back_to_the_oldest_unacknowledged_packet():
    requester, _ = make(timeout=10)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    requester.on_ack(ACK, psn(1), 0.001)
    deadline = requester.next_timer()
    assert deadline == pytest.approx(0.001 + 4.096e-6 * 1024)  # restarted by the progress
    requester.handle_timer(deadline)
    assert sent_psns(requester.next_packets(deadline, 100)) == [2, 3]
    assert requester.counters.retransmits[RetransmitCause.TIMEOUT] == 2
    assert requester.retries == 1


def test_used_up_retries_put_the_qp_in_the_error_state_and_fail_every_write():
    requester, events = make(timeout=10, retry_cnt=2)
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.post_write(bytes(PMTU), 0, 1, None)
    now = 0.0
    requester.next_packets(now, 100)
    timeouts = 0
    while requester.error is None:
        deadline = requester.next_timer()
        assert deadline is not None
        now = deadline
        requester.handle_timer(now)
        requester.next_packets(now, 100)
        timeouts += 1
    assert timeouts == 3  # the first expiry and two retries: retry_cnt=2
    assert now == pytest.approx(3 * 4.096e-6 * 1024)
    assert isinstance(events[0], ConnectionFailed)
    assert "retry_cnt=2" in events[0].reason and "IBV_WC_RETRY_EXC_ERR" in events[0].reason
    assert events[1:] == [
        MessageFailed(3, 0, requester.error or ""),
        MessageFailed(3, 1, requester.error or ""),
    ]
    assert requester.next_timer() is None and requester.next_packets(now, 10) == []
    with pytest.raises(ConnectionClosed):
        requester.post_write(b"more", 0, 1, None)
    assert requester.on_ack(ACK, psn(0), now) is DropReason.CONNECTION_CLOSED


def test_progress_resets_the_retry_count():
    requester, events = make(timeout=10, retry_cnt=1)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    for index in range(4):  # a timeout, then progress, four times over: never two in a row
        deadline = requester.next_timer()
        assert deadline is not None
        requester.handle_timer(deadline)
        requester.next_packets(deadline, 100)
        requester.on_ack(ACK, psn(index), deadline)
    assert requester.error is None and events[-1] == MessageAcked(3, 0, 4 * PMTU)
    assert requester.counters.timeouts == 4


def test_naks_without_progress_count_as_retries_too():
    requester, events = make(retry_cnt=1)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    requester.on_ack(NAK_SEQ, psn(1), 0.0)
    requester.next_packets(0.0, 100)  # the resend completes: a later NAK is a new loss
    requester.on_ack(NAK_SEQ, psn(1), 0.0)  # PSN 1 lost again: no progress
    assert isinstance(events[-1], MessageFailed)
    assert "sequence-error NAK" in (requester.error or "")


def test_a_nak_that_acknowledges_something_new_resets_the_retry_count():
    requester, events = make(retry_cnt=1)
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    for lost in range(1, 7):  # each resend gets further: a loss per window, never stuck
        requester.on_ack(NAK_SEQ, psn(lost), 0.0)
        requester.next_packets(0.0, 100)
    assert requester.error is None and requester.retries == 1
    requester.on_ack(ACK, psn(7), 0.0)
    assert events[-1] == MessageAcked(3, 0, 8 * PMTU)


def test_timeout_zero_means_no_timer_at_all():
    requester, _ = make(timeout=0)
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    assert requester.next_timer() is None
    requester.handle_timer(1e6)
    assert requester.error is None


@pytest.mark.parametrize(
    "syndrome",
    [
        AethSyndrome.NAK_REMOTE_ACCESS_ERROR,
        AethSyndrome.NAK_INVALID_REQUEST,
        AethSyndrome.NAK_REMOTE_OPERATIONAL_ERROR,
    ],
)
def test_a_fatal_nak_puts_the_qp_in_the_error_state(syndrome):
    requester, events = make()
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    requester.on_ack(syndrome, psn(0), 0.0)
    assert isinstance(events[0], ConnectionFailed)
    assert syndrome.name.split("NAK_")[1].replace("_", " ").lower() in events[0].reason


def test_no_more_than_max_outstanding_packets_are_unacknowledged():
    requester, _ = make(max_outstanding=3)
    requester.post_write(bytes(10 * PMTU), 0, 1, None)
    assert sent_psns(requester.next_packets(0.0, 100)) == [0, 1, 2]
    assert requester.pacing_wake() is None  # waiting for an ACK, not for the pacer
    requester.on_ack(ACK, psn(1), 0.0)
    assert sent_psns(requester.next_packets(0.0, 100)) == [3, 4]


def test_the_send_queue_has_a_depth():
    requester, _ = make(send_queue_depth=2)
    requester.post_write(b"a", 0, 1, None)
    requester.post_write(b"b", 0, 1, None)
    assert not requester.can_post()
    with pytest.raises(SendQueueFull):
        requester.post_write(b"c", 0, 1, None)


def test_packets_are_paced_at_the_dcqcn_rate_with_a_little_slack():
    rate = 1e6  # bytes/s: one 256-byte packet every 256 us
    params = DcqcnParams(line_rate=rate, min_rate=1e3)
    requester, _ = make(dcqcn=params, pacing_slack=0.0)
    requester.post_write(bytes(10 * PMTU), 0, 1, None)
    assert len(requester.next_packets(1.0, 100)) == 1
    assert requester.pacing_wake() == pytest.approx(1.0 + 256e-6)
    assert requester.next_packets(1.0 + 200e-6, 100) == []
    assert len(requester.next_packets(1.0 + 256e-6, 100)) == 1
    slack, _ = make(dcqcn=params, pacing_slack=600e-6)
    slack.post_write(bytes(10 * PMTU), 0, 1, None)
    slack.next_packets(1.0, 1)
    # after a busy loop of 1 ms the QP may catch up on up to 600 us of sending at once
    assert len(slack.next_packets(2.0, 100)) == 3


#: A testbed link slowed to 0.4 Mbit/s (bytes/s): the links, not the CPU, are the bottleneck.
SLOWED_LINK = 50e3


def test_a_nic_scaled_to_a_slowed_link_is_paced_at_it_and_cnps_cut_it_far_below_it():
    requester, _ = make(dcqcn=DcqcnParams.scaled_to(SLOWED_LINK), pacing_slack=0.0)
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    assert len(requester.next_packets(0.0, 100)) == 1
    assert requester.pacing_wake() == pytest.approx(PMTU / SLOWED_LINK)  # never above its port
    for cnp in range(1, 21):
        requester.rate.on_cnp(cnp * 50e-6)
    assert requester.rate.rate == pytest.approx(SLOWED_LINK / 1000)


def test_a_nic_at_the_default_ten_gigabit_cannot_be_cut_to_a_slowed_link():
    requester, _ = make(dcqcn=DcqcnParams())
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    for cnp in range(1, 21):
        requester.rate.on_cnp(cnp * 50e-6)
    assert requester.rate.rate == DcqcnParams().min_rate == 25 * SLOWED_LINK


# --- selective repeat -------------------------------------------------------------------------


def test_under_selective_repeat_a_selective_nak_resends_only_the_missing_psns():
    requester, events = make(selective_repeat=True)
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    assert sent_psns(requester.next_packets(0.0, 100)) == list(range(8))
    assert requester.on_selective_nak(psn(2), 1, 0.001) is None  # PSN 2 missing
    assert requester.on_selective_nak(psn(5), 2, 0.001) is None  # and 5-6
    assert sent_psns(requester.next_packets(0.001, 100)) == [2, 5, 6]
    assert requester.counters.retransmits[RetransmitCause.NACK] == 3
    assert requester.counters.go_backs == 0
    # routine recovery, not a retry; only a cumulative ACK completes the write
    assert requester.retries == 0 and events == []
    requester.on_ack(ACK, psn(7), 0.002)
    assert events == [MessageAcked(3, 0, 8 * PMTU)]


def test_go_back_n_resends_everything_from_the_hole_where_selective_repeat_resends_the_hole():
    go_back_n, _ = make()
    selective, _ = make(selective_repeat=True)
    for requester in (go_back_n, selective):
        requester.post_write(bytes(6 * PMTU), 0, 1, None)
        requester.next_packets(0.0, 100)
    go_back_n.on_ack(NAK_SEQ, psn(2), 0.001)
    selective.on_selective_nak(psn(2), 1, 0.001)
    assert sent_psns(go_back_n.next_packets(0.001, 100)) == [2, 3, 4, 5]
    assert sent_psns(selective.next_packets(0.001, 100)) == [2]


def test_resends_go_first_and_are_not_held_back_by_the_outstanding_cap():
    requester, _ = make(selective_repeat=True, max_outstanding=4)
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    assert sent_psns(requester.next_packets(0.0, 100)) == [0, 1, 2, 3]
    requester.on_selective_nak(psn(1), 1, 0.001)
    assert sent_psns(requester.next_packets(0.001, 100)) == [1]  # the cap still holds new data
    requester.on_ack(ACK, psn(1), 0.002)
    assert sent_psns(requester.next_packets(0.002, 100)) == [4, 5]


def test_a_selective_nak_for_packets_acknowledged_since_is_not_acted_on():
    requester, _ = make(selective_repeat=True)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    requester.on_selective_nak(psn(1), 2, 0.001)
    requester.on_ack(ACK, psn(1), 0.001)  # PSN 1 arrived after all (reordered, not lost)
    assert sent_psns(requester.next_packets(0.001, 100)) == [2]
    assert requester.on_selective_nak(psn(6), 1, 0.001) is DropReason.UNEXPECTED  # never sent


def test_a_selective_timeout_resends_the_oldest_packet_and_partial_acks_the_next_holes():
    requester, _ = make(selective_repeat=True, timeout=10)
    requester.post_write(bytes(8 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)
    deadline = requester.next_timer()
    assert deadline is not None
    requester.handle_timer(deadline)  # nothing heard: PSNs 0 and 4 were lost, say
    assert sent_psns(requester.next_packets(deadline, 100)) == [0]
    requester.on_ack(ACK, psn(3), deadline + 0.001)  # stops short of what was sent: a hole
    assert sent_psns(requester.next_packets(deadline + 0.001, 100)) == [4]
    requester.on_ack(ACK, psn(7), deadline + 0.002)
    assert requester.next_packets(deadline + 0.002, 100) == []
    assert requester.counters.retransmits[RetransmitCause.TIMEOUT] == 2
    assert requester.counters.timeouts == 1 and requester.retries == 0


def test_a_go_back_n_qp_takes_a_selective_nak_for_the_unknown_nak_it_is():
    requester, events = make()
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    requester.on_selective_nak(psn(0), 1, 0.0)
    assert isinstance(events[0], ConnectionFailed)
    assert "selective" in events[0].reason


# --- the adaptive timer -----------------------------------------------------------------------


def test_the_adaptive_timer_follows_rtt_samples_of_packets_sent_once():
    requester, _ = make(adaptive_retransmission=True, timeout=20)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 1)  # PSN 0 is timed
    assert requester.next_timer() == pytest.approx(RoceConfig().initial_rto)  # no sample yet
    requester.next_packets(0.001, 100)
    requester.on_ack(ACK, psn(1), 0.004)  # 4 ms after PSN 0 left
    assert requester.timer.srtt == pytest.approx(0.004)
    # RFC 6298: RTO = SRTT + 4 RTTVAR = 4 ms + 4 x 2 ms, restarted by the progress
    assert requester.next_timer() == pytest.approx(0.004 + 0.012)


def test_karns_rule_no_sample_from_an_ack_that_may_answer_a_retransmission():
    requester, _ = make(adaptive_retransmission=True, selective_repeat=True, timeout=20)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 100)  # PSN 0 timed
    requester.on_selective_nak(psn(0), 1, 0.001)
    requester.next_packets(0.001, 100)  # PSN 0 resent
    requester.on_ack(ACK, psn(3), 0.5)
    assert requester.timer.samples == 0 and requester.timer.srtt is None
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.5, 100)  # PSN 4, sent once: timed and sampled
    requester.on_ack(ACK, psn(4), 0.503)
    assert requester.timer.srtt == pytest.approx(0.003)


def test_adaptive_backoff_doubles_per_timeout_and_ends_with_progress():
    requester, _ = make(adaptive_retransmission=True, timeout=20, retry_cnt=7)
    requester.post_write(bytes(4 * PMTU), 0, 1, None)
    requester.next_packets(0.0, 1)
    requester.on_ack(ACK, psn(0), 0.002)  # SRTT 2 ms, RTTVAR 1 ms: RTO 6 ms
    requester.next_packets(0.002, 100)
    waits = []
    now = 0.002
    for _ in range(3):
        deadline = requester.next_timer()
        assert deadline is not None
        waits.append(deadline - now)
        now = deadline
        requester.handle_timer(now)
        requester.next_packets(now, 100)
    assert waits == pytest.approx([0.006, 0.012, 0.024])
    requester.on_ack(ACK, psn(1), now)  # progress: back to the measured RTO
    assert requester.timer.backoff == 0
    assert requester.next_timer() == pytest.approx(now + 0.006)


def test_adaptive_timeouts_still_run_out_of_retries():
    requester, events = make(adaptive_retransmission=True, timeout=20, retry_cnt=2)
    requester.post_write(bytes(PMTU), 0, 1, None)
    requester.next_packets(0.0, 10)
    now = 0.0
    while requester.error is None:
        deadline = requester.next_timer()
        assert deadline is not None
        now = deadline
        requester.handle_timer(now)
        requester.next_packets(now, 10)
    initial = RoceConfig().initial_rto
    assert now == pytest.approx(initial * (1 + 2 + 4))  # three timeouts, each twice as long
    assert "retry_cnt=2" in events[0].reason and "adaptive" in events[0].reason
