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
