"""A path comes back on a loaded host, on the simulated network.

On the linux target the agents share two cores with the switches: the receiving agent is off
the CPU for milliseconds now and then, longer than the RTO once the path is back and the round
trip short again. Each such stall fires an RTO although nothing was lost. Found spurious only
when the timed-out packet's own answer came within a round trip of its resend (it never does:
the resend leaves at once), every stall halved the window for good, and the goodput fell for
seconds after the restore. The answers to the rest of the flight, first transmissions sent
before the timeout, show it spurious (F-RTO), and the window is given back.
"""

from __future__ import annotations

import random
import statistics

from agent.sim.link import LinkConfig
from agent.sim.testbed import PairTestbed, build_pair

#: Four paths of 0.5 Gbit/s, 1 ms one way: a window of about 0.5 MB fills them.
PATH = LinkConfig(rate=62.5e6, delay=1e-3, queue_bytes=256 * 1100)
CUT, RESTORE, END = 0.06, 0.16, 0.3
BIN = 0.01
#: The receiving host is off the CPU this long, this often (longer than the RTO).
STALL, EVERY = 6e-3, 30e-3
MESSAGE = 256 * 1024


def _run(stalls: bool, seed: int = 1) -> tuple[list[float], PairTestbed]:
    testbed = build_pair([[PATH] * 4], seed=seed, region_size=1 << 30)
    network = testbed.network
    scheduler = network.scheduler
    network.fail_at(CUT, testbed.paths[0][0])
    network.repair_at(RESTORE, testbed.paths[0][0])

    def stall() -> None:
        testbed.receiver.stall(STALL)
        scheduler.after(EVERY, stall)

    if stalls:
        scheduler.at(EVERY / 2, stall)
    data = random.Random(seed).randbytes(MESSAGE)
    goodput: list[float] = []
    posted = 0
    for index in range(round(END / BIN)):
        while len(testbed.acked()) + 64 > posted:  # always data waiting
            testbed.post(data)
            posted += 1
        start = index * BIN
        testbed.run(until=start + BIN)
        goodput.append(testbed.delivered_bytes(start, start + BIN) * 8 / BIN)
    return goodput, testbed


def _mean(goodput: list[float], start: float, end: float) -> float:
    return statistics.mean(goodput[round(start / BIN) : round(end / BIN)])


def test_goodput_does_not_fall_when_a_path_comes_back_on_a_stalling_host():
    goodput, testbed = _run(stalls=True)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    assert stats.timeouts >= 5  # the stalls did fire RTOs: the case this is about
    # Nothing was lost to a stall: every one of its timeouts was found spurious and undone
    # (one more may be real: the path's cut loses what was on it).
    assert stats.spurious_timeouts >= stats.timeouts - 1
    before = _mean(goodput, 2 * EVERY / 3, CUT)
    assert _mean(goodput, RESTORE + 0.02, END) >= 0.9 * before
