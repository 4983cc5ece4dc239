"""An in-memory datagram link between two ``AgentRuntime``s, for tests without root.

Each end is a ``DatagramIO``: what one end sends arrives at the other as the
``IncomingDatagram`` the real UDP socket would have produced (same payload, IP context, EV,
DSCP and ECN), and a socketpair byte wakes the receiving runtime's selector. ``drop`` lets a
test lose datagrams on purpose. The side channel and control socket stay real (TCP on
127.0.0.1, Unix sockets), so everything above the datagram layer runs as in production.

``run_until`` turns the runtimes on the real clock. A test whose outcome depends on time (that
no RTO fires, say: the core's minimum RTO is 1 ms, less than a busy machine can stall a
process) gives its runtimes a ``SteppedClock`` and turns them with ``run_in_steps``: each round
of turns is a fixed step of that clock, so the core sees the same times however loaded the
machine is.
"""

from __future__ import annotations

import contextlib
import random
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence

from agent.core import IncomingDatagram, OutgoingDatagram
from agent.io.datagram_io import send_each
from agent.io.reactor import HasFileno
from agent.io.runtime import AgentRuntime

PLANE_A = bytes([10, 0, 0, 1])
PLANE_B = bytes([10, 0, 0, 2])


class MemoryDatagramIO:
    """One end of the link."""

    def __init__(self) -> None:
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self.inbox: deque[IncomingDatagram] = deque()
        self.peer: MemoryDatagramIO | None = None
        self.drop: Callable[[OutgoingDatagram], bool] | None = None
        self.sent = 0
        self.dropped = 0
        self.received = 0

    def sources(self) -> list[HasFileno]:
        return [self._wake_reader]

    def drain(
        self, source: HasFileno, handle: Callable[[IncomingDatagram], None], limit: int
    ) -> int:
        with contextlib.suppress(BlockingIOError):
            self._wake_reader.recv(4096)
        count = 0
        while self.inbox and count < limit:
            handle(self.inbox.popleft())
            count += 1
        self.received += count
        if self.inbox:
            self._wake_writer.send(b"x")
        return count

    def send(self, datagram: OutgoingDatagram) -> bool:
        self.sent += 1
        peer = self.peer
        if peer is None or (self.drop is not None and self.drop(datagram)):
            self.dropped += 1
            return True
        was_empty = not peer.inbox
        peer.inbox.append(
            IncomingDatagram(
                datagram.payload,
                datagram.ip,
                datagram.src_port,
                datagram.dscp,
                datagram.ecn,
                datagram.flow_label,
                datagram.dst_port,
            )
        )
        if was_empty:
            peer._wake_writer.send(b"x")
        return True

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int:
        return send_each(self.send, datagrams, start)

    def send_waiters(self) -> list[int]:
        return []

    def counters(self) -> dict[str, object]:
        return {"datagrams_sent": self.sent, "datagrams_received": self.received}

    def close(self) -> None:
        self._wake_reader.close()
        self._wake_writer.close()


def memory_link() -> tuple[MemoryDatagramIO, MemoryDatagramIO]:
    """Two connected ends."""
    a, b = MemoryDatagramIO(), MemoryDatagramIO()
    a.peer, b.peer = b, a
    return a, b


def random_loss(rate: float, seed: int) -> Callable[[OutgoingDatagram], bool]:
    """A ``drop`` function losing ``rate`` of the datagrams, reproducibly."""
    rng = random.Random(seed)
    return lambda _datagram: rng.random() < rate


class SteppedClock:
    """A monotonic clock (an ``AgentRuntime``'s ``clock=``) that moves only by ``advance``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def run_in_steps(
    runtimes: list[AgentRuntime],
    clock: SteppedClock,
    done: Callable[[], bool],
    step: float = 10e-6,
    hang_guard_s: float = 120.0,
) -> int:
    """Turn every runtime (none waiting) in rounds, each round ``step`` seconds of ``clock``,
    until ``done()``; returns the rounds it took. ``hang_guard_s`` of real time only stops a
    test that would never finish: it is no part of what the test checks."""
    deadline = time.monotonic() + hang_guard_s
    for runtime in runtimes:
        runtime.service()
    rounds = 0
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done after {rounds} rounds ({hang_guard_s} s)")
        clock.advance(step)
        for runtime in runtimes:
            runtime.turn(max_wait=0.0)
        rounds += 1
    return rounds


def run_until(
    runtimes: list[AgentRuntime], done: Callable[[], bool], timeout: float = 20.0
) -> None:
    """Turn every runtime in a round until ``done()``; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    for runtime in runtimes:
        runtime.service()
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout} s")
        for runtime in runtimes:
            runtime.turn(max_wait=0.002)
