"""The core benchmark: two cores on the simulated network run a real transfer and report
consistent figures."""

from __future__ import annotations

import itertools

import pytest

from agent.sim import run_core_benchmark


def test_benchmark_counts_datagrams_and_uses_the_callers_clock():
    ticks = itertools.count()
    result = run_core_benchmark(lambda: float(next(ticks)), messages=4, message_bytes=8192)
    assert result.wall_seconds == 1.0  # exactly one clock reading before and one after
    # Each datagram counted once: 4 x 8 data packets, and answers to them, at least one per
    # message and at most a SACK per data packet plus a completion ACK per message.
    data_packets = 4 * 8192 // 1024
    assert data_packets + 4 <= result.datagrams <= data_packets + data_packets + 4
    assert result.packets_per_second == result.datagrams  # over the one second of the clock
    assert result.simulated_seconds > 0
    assert result.as_dict()["messages"] == 4


def test_benchmark_refuses_meaningless_sizes():
    with pytest.raises(ValueError):
        run_core_benchmark(float, messages=0)
