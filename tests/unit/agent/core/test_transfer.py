"""Whole transfers over the simulated network: exactly-once delivery under impairments, a path
dying mid-transfer (goodput, no data on it within 3 RTTs, back after repair), and trimming-
driven recovery against timeout-only recovery."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core import MessageAcked, MrcConfig, RetransmitCause
from agent.sim import LinkConfig, PairTestbed, build_pair

MESSAGE = 64 * 1024


def _payloads(seed: int, count: int, size: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


def _assert_exactly_once(testbed: PairTestbed) -> None:
    received = Counter(event.msn for _t, event in testbed.received())
    assert received == Counter(testbed.posted.keys())  # every message once, none twice
    acked = Counter(e.msn for _t, e in testbed.sender.events if isinstance(e, MessageAcked))
    assert acked == Counter(testbed.posted.keys())
    for offset, data in testbed.posted.values():
        assert bytes(testbed.region.buffer[offset : offset + len(data)]) == data


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.integers(0, 24_000), min_size=3, max_size=10),
    ipv6=st.booleans(),
)
def test_every_message_arrives_exactly_once_and_intact_under_loss_reordering_duplication_and_trims(
    seed, sizes, ipv6
):
    impaired = LinkConfig(delay=20e-6, loss=0.10, reorder=0.2, duplicate=0.05, queue_bytes=6 * 1110)
    testbed = build_pair([[impaired] * 4], config=MrcConfig(ev_set_size=32), seed=seed, ipv6=ipv6)
    rng = random.Random(seed)
    for index, size in enumerate(sizes):
        testbed.post(rng.randbytes(size), immediate=index if index % 2 else None)
    assert testbed.run_until_acked(limit=5.0)
    _assert_exactly_once(testbed)
    immediates = {e.msn: e.immediate for _t, e in testbed.received()}
    assert len(immediates) == len(sizes)
    assert all(immediates[msn] == (msn if msn % 2 else None) for msn in immediates)


def test_impairments_in_the_exactly_once_scenario_really_happen():
    impaired = LinkConfig(delay=20e-6, loss=0.10, reorder=0.2, duplicate=0.05, queue_bytes=6 * 1110)
    testbed = build_pair([[impaired] * 4], config=MrcConfig(ev_set_size=32), seed=1)
    for data in _payloads(1, 8, 24_000):
        testbed.post(data)
    assert testbed.run_until_acked(limit=5.0)
    links = [link for path in testbed.paths[0] for link in (path.forward, path.backward)]
    assert sum(link.counters.lost for link in links) > 20
    assert sum(link.counters.trimmed for link in links) > 0
    assert sum(link.counters.duplicated for link in links) > 5
    assert sum(link.counters.reordered for link in links) > 20
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.retransmits[RetransmitCause.NACK] > 0
    assert stats.retransmits[RetransmitCause.SACK_GAP] > 0
    assert testbed.receiver.endpoint.connection_stats(testbed.receive_qp).duplicates_received > 0
    _assert_exactly_once(testbed)


# --- one of four paths dies ----------------------------------------------------------------

PATH = LinkConfig(delay=60e-6)  # 1 Gbit/s, 120 us base RTT: ~60 packets in flight on 4 paths
FAIL_AT = 3e-3
REPAIR_AT = 6e-3
PROBE_INTERVAL = MrcConfig().probe_interval


def _receiver_bytes(testbed: PairTestbed) -> int:
    return testbed.receiver.endpoint.connection_stats(testbed.receive_qp).data_bytes_received


def _failure_run(seed: int, messages: int) -> tuple[PairTestbed, float, float]:
    """Four paths, path 1 dies at FAIL_AT; returns the testbed, the sender's smoothed RTT when
    it died, and the goodput from 3 RTTs after the failure to the repair."""
    testbed = build_pair([[PATH] * 4], seed=seed, trace=True, region_size=1 << 24)
    for data in _payloads(seed, messages, MESSAGE):
        testbed.post(data)
    dead = testbed.paths[0][1]
    testbed.network.fail_at(FAIL_AT, dead)
    testbed.network.repair_at(REPAIR_AT, dead)
    testbed.run(until=FAIL_AT)
    srtt = testbed.sender.endpoint.connection_stats(testbed.send_qp).srtt
    assert srtt is not None
    start = FAIL_AT + 3 * srtt
    testbed.run(until=start)
    before = _receiver_bytes(testbed)
    testbed.run(until=REPAIR_AT)
    return testbed, srtt, (_receiver_bytes(testbed) - before) / (REPAIR_AT - start)


def _healthy_three_path_goodput(seed: int, start: float, messages: int) -> float:
    testbed = build_pair([[PATH] * 3], seed=seed, region_size=1 << 24)
    for data in _payloads(seed, messages, MESSAGE):
        testbed.post(data)
    testbed.run(until=start)
    before = _receiver_bytes(testbed)
    testbed.run(until=REPAIR_AT)
    return (_receiver_bytes(testbed) - before) / (REPAIR_AT - start)


def test_a_path_dying_mid_transfer_costs_no_message_and_little_goodput():
    seed, messages = 7, 48  # 3 MiB: still sending when the path is repaired
    testbed, srtt, goodput = _failure_run(seed, messages)
    assert testbed.sender.endpoint.connection_stats(testbed.send_qp).messages_acked < messages
    baseline = _healthy_three_path_goodput(seed, FAIL_AT + 3 * srtt, messages)
    assert goodput >= 0.7 * baseline
    assert testbed.run_until_acked(limit=1.0)
    _assert_exactly_once(testbed)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.timeouts == 0  # found by SACKs, not by the RTO


def test_a_dead_path_carries_no_data_3_rtts_after_its_first_loss_and_a_repaired_one_returns():
    testbed, srtt, _goodput = _failure_run(seed=11, messages=200)
    dead = testbed.paths[0][1].forward
    assert dead.first_down_drop is not None and dead.data_times is not None
    times = dead.data_times
    quiet_from = dead.first_down_drop + 3 * srtt
    assert [t for t in times if quiet_from <= t < REPAIR_AT] == []
    testbed.run(until=REPAIR_AT + 10 * PROBE_INTERVAL, stop=lambda: times[-1] >= REPAIR_AT)
    back = [t for t in times if t >= REPAIR_AT]
    assert back and back[0] - REPAIR_AT <= 10 * PROBE_INTERVAL
    assert dead.counters.delivered > 0


# --- trimming against timeouts --------------------------------------------------------------


def _completion_rtts(trim: bool, seed: int) -> tuple[float, dict[RetransmitCause, int]]:
    """A transfer through congested paths (small queues); only NACKs or only the RTO recover."""
    congested = LinkConfig(delay=20e-6, queue_bytes=8 * 1110, trim=trim)
    config = MrcConfig(ev_set_size=64, sack_loss_detection=False, tail_loss_probe=False)
    testbed = build_pair([[congested] * 2], config=config, seed=seed)
    for data in _payloads(seed, 20, 32 * 1024):
        testbed.post(data)
    assert testbed.run_until_acked(limit=10.0)
    _assert_exactly_once(testbed)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.min_rtt is not None
    return testbed.now / stats.min_rtt, stats.retransmits


def test_trimming_driven_recovery_finishes_in_fewer_rtts_than_timeout_only_recovery():
    trimmed_rtts, trimmed_causes = _completion_rtts(trim=True, seed=3)
    timeout_rtts, timeout_causes = _completion_rtts(trim=False, seed=3)
    assert trimmed_causes[RetransmitCause.NACK] > 0
    assert trimmed_causes[RetransmitCause.TIMEOUT] == 0
    assert timeout_causes[RetransmitCause.TIMEOUT] > 0
    assert trimmed_rtts < timeout_rtts


# --- other configurations ---------------------------------------------------------------------


def test_two_planes_keep_going_when_one_port_goes_down():
    testbed = build_pair([[LinkConfig(delay=20e-6)] * 2] * 2, seed=5)
    for data in _payloads(5, 12, 32 * 1024):
        testbed.post(data)
    testbed.run(until=0.5e-3)
    testbed.receiver.endpoint.set_plane_up(1, False)
    testbed.receiver.pump()
    testbed.run(until=1e-3)
    plane1 = [link for path in testbed.paths[1] for link in (path.forward,)]
    offered = sum(link.counters.data_offered for link in plane1)
    assert testbed.run_until_acked(limit=1.0)
    assert sum(link.counters.data_offered for link in plane1) == offered
    _assert_exactly_once(testbed)


def test_every_congestion_controller_completes_a_lossy_transfer():
    lossy = LinkConfig(delay=20e-6, loss=0.02, queue_bytes=16 * 1110)
    for name in ("nscc", "dcqcn", "fixed"):
        config = MrcConfig(ev_set_size=32, congestion_control=name)
        testbed = build_pair([[lossy] * 3], config=config, seed=2)
        for data in _payloads(2, 6, 20_000):
            testbed.post(data)
        assert testbed.run_until_acked(limit=2.0), name
        _assert_exactly_once(testbed)


def test_psns_wrapping_past_2_to_the_24_mid_transfer_change_nothing():
    lossy = LinkConfig(delay=20e-6, loss=0.05, reorder=0.1, queue_bytes=8 * 1110)
    testbed = build_pair(
        [[lossy] * 3], config=MrcConfig(ev_set_size=32), seed=9, first_psn=(1 << 24) - 40
    )
    for data in _payloads(9, 6, 20_000):
        testbed.post(data)
    assert testbed.run_until_acked(limit=2.0)
    _assert_exactly_once(testbed)
    sent = testbed.sender.endpoint.connection_stats(testbed.send_qp).data_packets_sent
    assert sent > 40  # the transfer did cross the wrap


# --- reordering taken for loss --------------------------------------------------------------

#: Four lossless paths of very different delays: packets on the slow ones trail packets sent
#: later on the fast ones, which loss detection first takes for losses.
SPREAD = [LinkConfig(delay=d) for d in (10e-6, 30e-6, 60e-6, 120e-6)]


def _resent_without_loss(seed: int, persist: int) -> tuple[int, int]:
    """(SACK-gap resends, losses seen disproved) of a lossless transfer over SPREAD."""
    config = MrcConfig(reorder_window_persist=persist)
    testbed = build_pair([SPREAD], config=config, seed=seed, region_size=1 << 24)
    for data in _payloads(seed, 20, MESSAGE):
        testbed.post(data)
    assert testbed.run_until_acked(limit=10.0)
    _assert_exactly_once(testbed)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.retransmits[RetransmitCause.TIMEOUT] == 0
    return stats.retransmits[RetransmitCause.SACK_GAP], stats.spurious_losses


def test_losses_disproved_by_late_originals_widen_the_window_and_cut_needless_resends():
    """Every SACK-gap resend here is needless (no path loses anything). The sender learns so
    from the answers to the late originals, and widening its reordering window on them
    resends fewer packets than a window that falls back to its base after every loss
    episode (persistence 1)."""
    adaptive = [_resent_without_loss(seed, persist=16) for seed in range(4)]
    forgetful = [_resent_without_loss(seed, persist=1) for seed in range(4)]
    assert sum(spurious for _, spurious in adaptive) > 0
    assert sum(resent for resent, _ in adaptive) < 0.8 * sum(resent for resent, _ in forgetful)
