"""Peers cannot flood the agent's log: each logger passes a burst per window, then counts."""

from __future__ import annotations

import logging

import pytest

from agent.io.log_limit import RateLimitFilter


def _record(name: str = "agent.io.inbound", msg: str = "refused %s") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, ("10.0.0.9",), None)


def test_a_burst_passes_then_records_are_held_back_until_the_window_ends():
    now = [0.0]
    limit = RateLimitFilter(burst=3, window=10.0, clock=lambda: now[0])
    passed = [limit.filter(_record()) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7
    now[0] = 10.0
    first = _record()
    assert limit.filter(first)
    assert first.getMessage() == "refused 10.0.0.9 (7 similar messages suppressed)"


def test_each_logger_has_its_own_budget():
    limit = RateLimitFilter(burst=1, window=10.0, clock=lambda: 0.0)
    assert limit.filter(_record("agent.io.inbound"))
    assert not limit.filter(_record("agent.io.inbound"))
    assert limit.filter(_record("agent.io.control_server"))


def test_nonsense_limits_are_refused():
    with pytest.raises(ValueError):
        RateLimitFilter(burst=0)
    with pytest.raises(ValueError):
        RateLimitFilter(window=0)
