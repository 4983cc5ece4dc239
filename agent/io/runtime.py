"""The agent's event loop: sockets and clock around the sans-IO core.

One thread, one ``Reactor`` (epoll). Each turn:

1. wait until a socket is ready or the earliest deadline (the core's or the reactor's);
2. drain each ready UDP socket in batches of ``RECEIVE_BATCH`` datagrams into the core, each
   stamped with the clock as it is handed over (RTT samples stay sharp inside a batch);
3. run the core's timers if due, then the reactor's (side channel, control, tools);
4. hand the core's events to whoever owns the connection (``on_events``);
5. send everything the core has to send; what the raw socket cannot take now waits in a
   backlog, in order, and nothing more is pulled from the core until it drains.

The per-packet path is: ``recvmsg_into`` -> ``IncomingDatagram`` -> core, and core ->
``OutgoingDatagram`` -> one ``sendmsg`` of header + payload. No scapy, no asyncio, no copies
beyond the one ``bytes`` per received datagram.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence

from agent.core import Event, IncomingDatagram, MrcConfig, OutgoingDatagram
from agent.io.endpoints import EndpointPool
from agent.io.errors import PermissionDeniedError
from agent.io.raw_sender import RawSender
from agent.io.reactor import READ, WRITE, Reactor
from agent.io.udp_receiver import UdpReceiver
from agent.wire.constants import ROCEV2_UDP_PORT

#: Datagrams drained from one socket before the core's output is sent: large enough to
#: amortise the loop, small enough that SACKs are turned into new data promptly.
RECEIVE_BATCH = 64
#: Longest sleep when nothing is scheduled: bounds how late a missed wakeup could be noticed.
MAX_IDLE_WAIT = 1.0

EventHandler = Callable[[Event], None]


class AgentRuntime:
    """A running MRC endpoint on this host's planes: UDP 4791 in, raw IP out.

    ``local_addresses`` are the plane addresses (packed, plane order). Raises
    ``PermissionDeniedError`` without CAP_NET_RAW and ``PortInUseError`` when UDP ``udp_port``
    is taken; nothing is left open when construction fails.
    """

    def __init__(
        self,
        local_addresses: Sequence[bytes],
        config: MrcConfig,
        *,
        udp_port: int = ROCEV2_UDP_PORT,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.local_addresses = tuple(local_addresses)
        ipv6 = len(self.local_addresses[0]) == 16
        self.reactor = Reactor()
        self.pool = EndpointPool(
            self.local_addresses,
            config,
            seed if seed is not None else int.from_bytes(os.urandom(8), "big"),
        )
        self.sender = RawSender()
        self.receiver: UdpReceiver | None = None
        try:
            try:
                self.sender.open(ipv4=not ipv6, ipv6=ipv6)
            except PermissionError:
                raise PermissionDeniedError(
                    "sending MRC packets needs a raw IP socket (CAP_NET_RAW): run as root"
                ) from None
            self.receiver = UdpReceiver(ipv4=not ipv6, ipv6=ipv6, port=udp_port)
        except BaseException:
            self.sender.close()
            self.reactor.close()
            raise
        for sock in self.receiver.sockets:
            self.reactor.watch(sock, READ, self._udp_ready(sock))
        self._backlog: deque[OutgoingDatagram] = deque()
        self._handlers: dict[int, EventHandler] = {}
        self._closers: list[Callable[[], None]] = []
        self.unclaimed_events = 0

    @property
    def ipv6(self) -> bool:
        """Whether the planes are IPv6."""
        return len(self.local_addresses[0]) == 16

    # --- wiring ---------------------------------------------------------------------------

    def on_events(self, qp: int, handler: EventHandler | None) -> None:
        """Send the core's events of connection ``qp`` to ``handler`` (None: stop)."""
        if handler is None:
            self._handlers.pop(qp, None)
        else:
            self._handlers[qp] = handler

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the runtime closes (listeners, sessions)."""
        self._closers.append(closer)

    def _udp_ready(self, sock: socket.socket) -> Callable[[int], None]:
        receiver = self.receiver
        assert receiver is not None
        pool = self.pool
        clock = self.clock

        def handle(datagram: IncomingDatagram) -> None:
            pool.receive_datagram(datagram, clock())

        def ready(_mask: int) -> None:
            receiver.drain(sock, handle, RECEIVE_BATCH)

        return ready

    # --- the loop -------------------------------------------------------------------------

    def turn(self) -> None:
        """One iteration: wait, receive, run timers, dispatch events, send."""
        now = self.clock()
        deadline = _earliest(self.pool.next_timer(), self.reactor.next_deadline())
        if deadline is None:
            timeout: float = MAX_IDLE_WAIT
        else:
            timeout = min(max(deadline - now, 0.0), MAX_IDLE_WAIT)
        self.reactor.poll(timeout)
        self.service()

    def service(self) -> None:
        """Everything after the wait: timers, events and sending (also after local calls
        that gave the core work, e.g. a new post)."""
        now = self.clock()
        core_deadline = self.pool.next_timer()
        if core_deadline is not None and core_deadline <= now:
            self.pool.handle_timer(now)
        self.reactor.run_timers(now)
        self._dispatch_events()
        self._send(now)
        # Sending can finish nothing by itself, but handlers may have posted more work while
        # dispatching: events raised by that work come out on the next turn.

    def run(self, until: Callable[[], bool]) -> None:
        """Turn until ``until()`` is true (checked after every turn)."""
        self.service()
        while not until():
            self.turn()

    def _dispatch_events(self) -> None:
        pool = self.pool
        handlers = self._handlers
        while True:
            event = pool.next_event()
            if event is None:
                return
            handler = handlers.get(event.qp)
            if handler is None:
                self.unclaimed_events += 1
            else:
                handler(event)

    def _send(self, now: float) -> None:
        backlog = self._backlog
        if backlog and not self._drain_backlog():
            return
        send = self.sender.send
        datagrams = self.pool.datagrams_to_send(now)
        for index, datagram in enumerate(datagrams):
            if not send(datagram):
                backlog.extend(datagrams[index:])
                self._watch_writable(True)
                return

    def _drain_backlog(self) -> bool:
        backlog = self._backlog
        send = self.sender.send
        while backlog:
            if not send(backlog[0]):
                return False
            backlog.popleft()
        self._watch_writable(False)
        return True

    def _watch_writable(self, on: bool) -> None:
        for fd in self.sender.filenos():
            holder = _Fd(fd)
            if on:
                self.reactor.watch(holder, WRITE, self._writable)
            else:
                self.reactor.unwatch(holder)

    def _writable(self, _mask: int) -> None:
        if self._drain_backlog():
            self._send(self.clock())

    # --- teardown -------------------------------------------------------------------------

    def close(self) -> None:
        """Close every session, listener and socket (idempotent)."""
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            closer()
        self.pool.close_all()
        if self.receiver is not None:
            self.receiver.close()
            self.receiver = None
        self.sender.close()
        self.reactor.close()

    def __enter__(self) -> AgentRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Fd:
    """A bare file descriptor for the selector (the raw sockets are watched by number)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
