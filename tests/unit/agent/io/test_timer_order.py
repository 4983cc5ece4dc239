"""The runtime runs the core's due timers only once it has read what waits in the socket:
a timer acting with answers unread would judge a probe or a packet lost, or resend by the
RTO, on stale news. A flood cannot hold the timers off for more than a bounded number of
turns."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from agent.core import IncomingDatagram, MrcConfig
from agent.core.datagram import IpContext
from agent.io import runtime as runtime_module
from agent.io.runtime import RECEIVE_BATCH, AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, MemoryDatagramIO, memory_link


class _Recorder:
    """Stands in for the core's timer and receive entry points, noting their order."""

    def __init__(self, runtime: AgentRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.received = 0
        self.timers_at: list[int] = []  # datagrams received when each timer run happened
        receive = runtime.pool.receive_datagrams

        def receive_datagrams(batch: Sequence[IncomingDatagram], now: float) -> None:
            self.received += len(batch)
            receive(batch, now)

        monkeypatch.setattr(runtime.pool, "receive_datagrams", receive_datagrams)
        monkeypatch.setattr(runtime.pool, "next_timer", lambda: 0.0)
        monkeypatch.setattr(
            runtime.pool, "handle_timer", lambda now: self.timers_at.append(self.received)
        )


@pytest.fixture
def link() -> Iterator[tuple[MemoryDatagramIO, AgentRuntime]]:
    link_a, link_b = memory_link()
    runtime = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=link_a, seed=3)
    yield link_a, runtime
    runtime.close()
    link_b.close()


def _queue(io: MemoryDatagramIO, count: int) -> None:
    """``count`` datagrams waiting (junk: the core counts and drops them)."""
    ip = IpContext(src=PLANE_B, dst=PLANE_A)
    for _ in range(count):
        io.inbox.append(IncomingDatagram(b"\x00" * 20, ip, 0xC000, 0, 0))
    io._wake_writer.send(b"x")


def test_due_timers_wait_until_the_waiting_input_is_read(
    link: tuple[MemoryDatagramIO, AgentRuntime], monkeypatch: pytest.MonkeyPatch
) -> None:
    io, runtime = link
    recorder = _Recorder(runtime, monkeypatch)
    waiting = 3 * RECEIVE_BATCH + 10
    _queue(io, waiting)
    for _ in range(6):
        runtime.turn(max_wait=0.0)
    assert recorder.received == waiting
    assert recorder.timers_at and recorder.timers_at[0] == waiting


def test_a_flood_holds_the_timers_off_for_a_bounded_number_of_turns(
    link: tuple[MemoryDatagramIO, AgentRuntime], monkeypatch: pytest.MonkeyPatch
) -> None:
    io, runtime = link
    monkeypatch.setattr(runtime_module, "MAX_TIMER_DEFERRALS", 3)
    recorder = _Recorder(runtime, monkeypatch)
    _queue(io, 100 * RECEIVE_BATCH)
    for _ in range(4):
        runtime.turn(max_wait=0.0)
    assert recorder.timers_at == [4 * RECEIVE_BATCH]  # three deferred turns, then they ran
