"""The runtime sends at most ``SEND_BURST`` data packets per turn, and a turn that stopped
there is followed by one that does not wait: the answers that came meanwhile are read, then
the next burst goes. Unbounded, one burst was as large as the window the last SACKs opened,
and the answers to it waited in the socket until it was all sent."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest

from agent.core import ConnectionSpec, MrcConfig
from agent.core.datagram import IpContext, OutgoingDatagram
from agent.io.endpoints import EndpointPool
from agent.io.runtime import SEND_BURST, AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, memory_link


@pytest.fixture
def runtime() -> Iterator[AgentRuntime]:
    link_a, link_b = memory_link()
    agent = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link_a, seed=3)
    yield agent
    agent.close()
    link_b.close()


def test_each_turn_asks_the_core_for_at_most_a_burst(
    runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits: list[int | None] = []

    def datagrams_to_send(now, slots=None, limit=None):  # type: ignore[no-untyped-def]
        limits.append(limit)
        return []

    monkeypatch.setattr(runtime.pool, "datagrams_to_send", datagrams_to_send)
    runtime.turn(max_wait=0.0)
    assert limits == [SEND_BURST]


@pytest.mark.parametrize("limited", [True, False])
def test_a_turn_after_a_burst_that_used_its_limit_does_not_wait(
    runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch, limited: bool
) -> None:
    def datagrams_to_send(now, slots=None, limit=None):  # type: ignore[no-untyped-def]
        runtime.pool.data_sent_last_call = SEND_BURST if limited else SEND_BURST - 1
        return []

    monkeypatch.setattr(runtime.pool, "datagrams_to_send", datagrams_to_send)
    runtime.turn(max_wait=0.0)  # sends (limited or not)
    assert runtime.wait_time(runtime.clock(), 0.5) == (0.0 if limited else 0.5)


def test_a_full_socket_buffer_leaves_the_wait_to_writability(
    runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def datagrams_to_send(now, slots=None, limit=None):  # type: ignore[no-untyped-def]
        runtime.pool.data_sent_last_call = SEND_BURST
        return []

    monkeypatch.setattr(runtime.pool, "datagrams_to_send", datagrams_to_send)
    runtime.turn(max_wait=0.0)
    assert runtime.wait_time(runtime.clock(), 0.5) == 0.0
    runtime.io.send_many = lambda datagrams, start=0: start  # type: ignore[method-assign]
    runtime._queue([OutgoingDatagram(b"x", IpContext(PLANE_A, PLANE_A), 0, 0xC000, 0, 0, 0)])
    runtime.turn(max_wait=0.0)  # the backlog cannot drain: nothing more is taken from the core
    # The socket's writability wakes the loop now, not a busy turn.
    assert runtime.wait_time(runtime.clock(), 0.5) == 0.5


def test_a_pool_spends_one_limit_across_its_endpoints() -> None:
    wide = MrcConfig(initial_window=1 << 22, max_window=1 << 22)
    pool = EndpointPool([PLANE_A], wide, seed=1)
    other = pool.endpoint_for(dataclasses.replace(wide, ev_set_size=128))
    for endpoint in (pool.default, other):
        qp = pool.allocate_qp(endpoint)
        pool.connect(endpoint, ConnectionSpec(qp, qp + 1, (PLANE_B,)))
        endpoint.post_write(qp, os.urandom(20 * wide.payload_size), 0, 0x55)
    assert len(pool.datagrams_to_send(0.0, limit=30)) == 30  # 20 of one endpoint, 10 of the other
    assert pool.data_sent_last_call == 30
    assert len(pool.datagrams_to_send(0.0, limit=30)) == 10
    assert pool.data_sent_last_call == 10
