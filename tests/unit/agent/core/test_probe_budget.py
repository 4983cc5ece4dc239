"""Paths dying under a 256-EV connection on a slow fabric: with one of four paths dead EV probes
stay a small share of the packets and goodput stays that of the surviving paths; with all four
dead, probing stays sparse and the transfer resumes once they are back.

The BMv2 testbed found this (``make experiment NAME=failover``): after a spine link cut, every
retired EV (a quarter of 256) was probed every probe interval, 128,614 probes against 16,315
data packets. A software switch pays per packet, not per byte, so small probes are as costly as
data there. The links here run at 20 Mbit/s with a 1 ms base RTT, the packet rate of that
testbed, where 64 probes per millisecond outnumber the data.
"""

from __future__ import annotations

import random

from agent.core import MrcConfig
from agent.sim import LinkConfig, PairTestbed, build_pair

SLOW_PATH = LinkConfig(rate=2.5e6, delay=500e-6, queue_bytes=32 * 1100)
MESSAGE = 64 * 1024
MESSAGES = 40  # 2.6 MB: still sending at MEASURE_END on three 20 Mbit/s paths
FAIL_AT = 5e-3
SETTLED = FAIL_AT + 20e-3  # retired EVs replaced, stand-ins admitted
MEASURE_END = 0.25


def _post_all(testbed: PairTestbed, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(MESSAGES):
        testbed.post(rng.randbytes(MESSAGE))


def _delivered(testbed: PairTestbed) -> int:
    return testbed.receiver.endpoint.connection_stats(testbed.receive_qp).data_bytes_received


def test_after_a_path_dies_ev_probes_stay_a_small_share_of_packets_and_goodput_holds():
    seed = 3
    testbed = build_pair([[SLOW_PATH] * 4], seed=seed, region_size=1 << 23)
    _post_all(testbed, seed)
    testbed.network.fail_at(FAIL_AT, testbed.paths[0][1])
    testbed.run(until=SETTLED)
    before = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    delivered_before = _delivered(testbed)
    testbed.run(until=MEASURE_END)
    after = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert after.messages_acked < MESSAGES  # still busy: the goodput below is the path's limit
    assert after.ev_probes_answered < after.ev_probes_sent  # probes did hit the dead path
    probes = after.ev_probes_sent - before.ev_probes_sent
    data = after.data_packets_sent - before.data_packets_sent
    assert probes <= 0.10 * (probes + data)
    goodput = (_delivered(testbed) - delivered_before) / (MEASURE_END - SETTLED)

    healthy = build_pair([[SLOW_PATH] * 3], seed=seed, region_size=1 << 23)
    _post_all(healthy, seed)
    healthy.run(until=SETTLED)
    healthy_before = _delivered(healthy)
    healthy.run(until=MEASURE_END)
    baseline = (_delivered(healthy) - healthy_before) / (MEASURE_END - SETTLED)
    assert goodput >= 0.7 * baseline

    assert testbed.run_until_acked(limit=5.0)
    assert not testbed.failed()


def test_while_every_path_is_dead_fewer_probes_go_out_than_the_set_has_evs_and_all_resumes():
    seed = 3
    testbed = build_pair([[SLOW_PATH] * 4], seed=seed, region_size=1 << 23)
    _post_all(testbed, seed)
    outage_end = 0.2
    for path in testbed.paths[0]:
        testbed.network.fail_at(FAIL_AT, path)
        testbed.network.repair_at(outage_end, path)
    testbed.run(until=SETTLED)
    before = testbed.sender.endpoint.connection_stats(testbed.send_qp).ev_probes_sent
    testbed.run(until=outage_end)
    probes = testbed.sender.endpoint.connection_stats(testbed.send_qp).ev_probes_sent - before
    # Each failed stand-in used to be replaced and probed at once: 2,754 probes here.
    assert probes < MrcConfig().ev_set_size
    assert testbed.run_until_acked(limit=5.0)
    assert not testbed.failed()


def test_on_links_slower_than_the_probe_interval_stand_ins_are_admitted_by_their_probes():
    """1000 packets/s over four 3 ms paths: the queue makes RTTs grow far beyond the first
    samples and spurious timeouts retire EVs. Their stand-ins' probes take as long as data
    does; timing them out after twice the (stale) smoothed RTT failed every one of them
    (0 of 189 answered), so no stand-in ever carried data."""
    slow = LinkConfig(rate=0.25e6, delay=3e-3, queue_bytes=64 * 1100, trim=False)
    testbed = build_pair([[slow] * 4], seed=1, region_size=1 << 22)
    rng = random.Random(1)
    for _ in range(16):
        testbed.post(rng.randbytes(8192))
    assert testbed.run_until_acked(limit=5.0)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    # A timeout now retires one EV, not the whole flight: few stand-ins, and they get in.
    assert stats.ev_probes_sent <= 0.1 * stats.data_packets_sent
    assert stats.ev_probes_answered >= 0.5 * stats.ev_probes_sent


def test_when_no_ev_can_carry_data_one_probe_per_timeout_goes_out_and_data_resumes_after_repair():
    """A window larger than the EV set through a total outage: each timeout retires the EV of
    the packet it resends (it used to retire every EV in flight, all 256 slots), and their
    stand-ins fail their probes while the outage lasts. The
    replacements wait for the probe budget, which data packets earn, and with no EV to send
    on there are none. A starved round earns one probe per probe timeout: fewer probes than
    rounds through the outage (not one per round, which on BMv2 would be a storm of its own),
    and data flows again within a few RTOs of the repair."""
    path = LinkConfig(rate=12.5e6, delay=200e-6, queue_bytes=256 * 1100)
    config = MrcConfig(congestion_control="fixed", initial_window=400 * 1024)
    outage = (20e-3, 0.3)
    for seed in (1, 2, 3):
        testbed = build_pair([[path] * 4], config=config, seed=seed, region_size=1 << 23)
        rng = random.Random(seed)
        for _ in range(100):
            testbed.post(rng.randbytes(64 * 1024))
        for dead in testbed.paths[0]:
            testbed.network.fail_at(outage[0], dead)
            testbed.network.repair_at(outage[1], dead)
        testbed.run(until=0.1)
        probes_before = testbed.sender.endpoint.connection_stats(testbed.send_qp).ev_probes_sent
        testbed.run(until=outage[1])
        stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
        rounds = (outage[1] - 0.1) / config.probe_interval
        assert stats.ev_probes_sent - probes_before < rounds / 2
        before = testbed.receiver.endpoint.connection_stats(testbed.receive_qp)

        def resumed(
            testbed: PairTestbed = testbed, before: int = before.data_bytes_received
        ) -> bool:
            stats = testbed.receiver.endpoint.connection_stats(testbed.receive_qp)
            return stats.data_bytes_received > before

        testbed.run(until=outage[1] + 1.0, stop=resumed)
        assert resumed()
        assert testbed.now - outage[1] < 0.06
