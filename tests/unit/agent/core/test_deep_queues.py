"""A 256-EV transfer over paths whose queues hold seconds of packets, as on the spray experiment's
slowed fabric (links at tens of packets/s behind deep queues, RTTs of seconds).

The BMv2 testbed found this (``make experiment NAME=spray``): flows failed with "no data
acknowledged" and every EV ASSUMED_BAD. The simulator shows why: the RTO was capped at
``rto_max`` (1 s) below the path's RTT, so every copy of a packet was retransmitted before any
could be answered, no RTT sample was ever taken (the echo matched only the latest copy), each
timeout retired every EV in flight and probes timed out before their answers came back.
"""

from __future__ import annotations

import random

from agent.core import MrcConfig
from agent.sim import LinkConfig, build_pair
from wire.constants import EvState

PACKET = 1100
#: 10 packets/s behind a 32-packet queue: 3.2 s of queueing per path.
DEEP_QUEUE_PATH = LinkConfig(
    rate=10 * PACKET, delay=1e-3, queue_bytes=32 * PACKET, ecn=False, trim=False
)
MESSAGES = 16
MESSAGE = 16 * 1024  # 256 packets: about 6.4 s of the four paths' 40 packets/s
LIMIT = 60.0


def _transfer(seed: int):
    testbed = build_pair([[DEEP_QUEUE_PATH] * 4], seed=seed, region_size=1 << 22)
    rng = random.Random(seed)
    for _ in range(MESSAGES):
        testbed.post(rng.randbytes(MESSAGE))
    done = testbed.run_until_acked(limit=LIMIT)
    return testbed, done


def test_a_transfer_over_paths_with_seconds_of_queueing_completes_without_failing():
    testbed, done = _transfer(seed=1)
    assert not testbed.failed()
    assert done, f"only {len(testbed.acked())} of {MESSAGES} messages acked in {LIMIT} s"


def test_the_rto_follows_an_rtt_of_seconds_instead_of_firing_below_it():
    testbed, _ = _transfer(seed=2)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.srtt is not None and stats.srtt > 0.5  # 10 packets/s: 0.1 s per queued packet
    assert stats.rto > stats.srtt
    data_packets = MESSAGES * MESSAGE // 1024
    # Timeouts resend what they cover, not the whole flight: at most one packet in two a copy.
    assert stats.data_packets_sent <= 1.5 * data_packets


def test_probes_do_not_multiply_the_load_of_a_slow_path_nor_retire_every_ev():
    testbed, _ = _transfer(seed=3)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.ev_probes_sent <= 0.25 * stats.data_packets_sent
    active = testbed.sender.endpoint.connection_stats(testbed.send_qp).evs[:256]
    good = sum(1 for ev in active if ev.state is EvState.GOOD)
    assert good >= 128, f"only {good} of 256 slots GOOD after a lossless transfer"


def test_a_peer_heard_with_an_rtt_of_seconds_is_given_four_rtos_of_silence_not_3_s():
    round_trip = 2.0
    long_path = LinkConfig(rate=None, delay=round_trip / 2)
    testbed = build_pair([[long_path] * 4], seed=4, region_size=1 << 22)
    rng = random.Random(4)
    for _ in range(32):
        testbed.post(rng.randbytes(16 * 1024))
    cut_at = 4.0
    for path in testbed.paths[0]:
        testbed.network.fail_at(cut_at, path)
    testbed.run(until=cut_at)
    at_cut = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert at_cut.srtt is not None and at_cut.srtt > 1.5
    rto = at_cut.rto  # nothing is heard after the cut: no new sample changes it
    assert rto >= at_cut.srtt
    testbed.run(until=cut_at + 60.0, stop=lambda: bool(testbed.failed()))
    failed = testbed.failed()
    assert failed and "peer unreachable" in failed[0].reason
    assert f"nothing heard for {4 * rto:.3g} s" in failed[0].reason
    # Four RTOs of silence counted from the last answer heard, which arrived at most one round
    # trip before the cut: the connection fails between 4 RTOs less a round trip and 4 RTOs
    # after the cut (here about 6 to 8 s), where a fixed 3 s gave up within 3 s of it.
    assert 4 * rto - round_trip <= testbed.now - cut_at <= 4 * rto
    assert 4 * rto - round_trip > MrcConfig().peer_timeout
