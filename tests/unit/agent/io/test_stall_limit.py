"""How long a transfer may go without an acknowledged byte before it is declared stalled."""

from __future__ import annotations

import dataclasses

from agent.io.outbound import STALL_RTOS, STALL_TIMEOUT, stall_limit
from agent.sim import LinkConfig, build_pair


def _stats(rto: float):
    testbed = build_pair([[LinkConfig()]], region_size=1 << 16)
    stats = testbed.sender.endpoint.connection_stats(testbed.send_qp)
    return dataclasses.replace(stats, rto=rto)


def test_on_a_fast_path_the_configured_stall_timeout_applies():
    assert stall_limit(STALL_TIMEOUT, _stats(rto=0.01)) == STALL_TIMEOUT


def test_on_a_path_of_seconds_the_limit_stretches_to_several_rtos():
    # The spray experiment's slowed fabric: RTTs of seconds, an RTO of 6 s after one backoff.
    assert stall_limit(STALL_TIMEOUT, _stats(rto=6.0)) == STALL_RTOS * 6.0 > STALL_TIMEOUT
