"""The core benchmark entry point: it runs a real transfer and reports consistent figures."""

from __future__ import annotations

import itertools

import pytest

from agent.sim import run_core_benchmark


def test_benchmark_counts_datagrams_and_uses_the_callers_clock():
    ticks = itertools.count()
    result = run_core_benchmark(lambda: float(next(ticks)), messages=4, message_bytes=8192)
    assert result.wall_seconds == 1.0  # exactly one clock reading before and one after
    # 4 x 8 data packets, each answered by a SACK, plus 4 completion ACKs, seen on both ends
    assert result.datagrams >= 2 * (32 + 32 + 4)
    assert result.packets_per_second == result.datagrams
    assert result.simulated_seconds > 0
    assert result.as_dict()["messages"] == 4


def test_benchmark_refuses_meaningless_sizes():
    with pytest.raises(ValueError):
        run_core_benchmark(float, messages=0)
