"""The agent's event loop: sockets and clock around the sans-IO core.

One thread, one ``Reactor`` (epoll). Each turn:

1. wait until a socket is ready or the earliest deadline (the core's or the reactor's);
2. drain each ready UDP socket in batches of up to ``RECEIVE_BATCH`` datagrams into the core,
   each batch stamped with the clock once it is read (every datagram in it had arrived by
   then; stamping each as it is handed over would charge it the processing of the others);
3. run the core's timers if due, then the reactor's (side channel, control, tools);
4. hand the core's events to whoever owns the connection (``on_events``);
5. send what the core has to send, at most ``SEND_BURST`` data packets (then the next turn
   starts without waiting, and reads the answers that came meanwhile before it sends more);
   what the raw socket cannot take now waits in a backlog, in order, and nothing more is
   pulled from the core until it drains.

The per-packet path is: ``recvmmsg`` batch -> ``IncomingDatagram`` -> core, and core ->
its slot of a ``sendmmsg`` batch (data packets written there in place, see
``agent.core.send_slots``; control packets as an ``OutgoingDatagram`` copied in), the IP and
UDP headers put in front by ``agent.io.raw_sender`` (one ``recvmsg_into`` / ``sendmsg`` per
datagram where the C library lacks the batched calls, see ``agent.io.mmsg``). No scapy, no
asyncio; each datagram's bytes are copied once into a ``bytes`` when received and once into
the send batch.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

from agent.core import Event, IncomingDatagram, MrcConfig, OutgoingDatagram
from agent.core.send_slots import SendSlots
from agent.io.carrier import PortWatch
from agent.io.datagram_io import DatagramIO, SocketDatagramIO
from agent.io.endpoints import EndpointPool
from agent.io.errors import UsageError
from agent.io.reactor import READ, WRITE, HasFileno, Reactor

#: Datagrams drained from one socket before the core's output is sent: large enough to
#: amortise the loop, small enough that SACKs are turned into new data promptly.
RECEIVE_BATCH: Final = 64
#: Data packets sent per turn at most: the answers (SACKs, probe answers) that arrive while a
#: burst is sent are read before the next one. Unbounded, a burst was as large as the window
#: the last SACKs opened: their answers waited in the socket for the whole burst, RTT samples
#: grew with it, and EV probes sent after it failed their timeout. Much smaller costs more
#: turns (each a poll and a drain): 256 is four send batches.
SEND_BURST: Final = 256
#: Turns in a row the core's due timers may wait for a socket still holding input (see
#: ``service``): 16 batches, 1024 datagrams.
MAX_TIMER_DEFERRALS = 16
#: Longest sleep when nothing is scheduled: bounds how late a missed wakeup could be noticed.
MAX_IDLE_WAIT: Final = 1.0

EventHandler = Callable[[Event], None]

log = logging.getLogger(__name__)


class AgentRuntime:
    """A running MRC endpoint on this host's planes.

    ``local_addresses`` are the plane addresses (packed, plane order). The network is
    ``datagram_io`` (default: UDP 4791 in, raw IP out, see ``SocketDatagramIO``, which raises
    ``PermissionDeniedError`` without CAP_NET_RAW and ``PortInUseError`` when the port is
    taken); nothing is left open when construction fails. ``watch_ports`` (by default: with
    the real sockets) follows the planes' ports over netlink (``agent.io.carrier``).
    """

    def __init__(
        self,
        local_addresses: Sequence[bytes],
        config: MrcConfig,
        *,
        datagram_io: DatagramIO | None = None,
        seed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        side_channel_secret: bytes | None = None,
        watch_ports: bool | None = None,
    ) -> None:
        self.clock = clock
        #: Seconds since the epoch: what authenticated hellos carry.
        self.wall_clock = wall_clock
        #: The secret this host's outgoing hellos are signed with (``--secret-file``).
        self.side_channel_secret = side_channel_secret
        #: Sections ``mrc-agent status`` adds, by name (the side channel registers one).
        self.status_providers: dict[str, Callable[[], dict[str, Any]]] = {}
        #: Given EVs for a connection toward the peer's plane addresses, with the set's size
        #: (structured EV mode: ``agent.io.structured_evs``); None, or None returned: random.
        self.choose_evs: (
            Callable[[Sequence[bytes], int], tuple[tuple[int, int], ...] | None] | None
        ) = None
        self.local_addresses = tuple(local_addresses)
        if not self.local_addresses:
            raise UsageError("an agent needs at least one plane address")
        self.pool = EndpointPool(
            self.local_addresses,
            config,
            seed if seed is not None else int.from_bytes(os.urandom(8), "big"),
        )
        self.io: DatagramIO = datagram_io or SocketDatagramIO(ipv6=self.ipv6)
        self.reactor = Reactor()
        for source in self.io.sources():
            self.reactor.watch(source, READ, self._source_ready(source), self._receive_failed)
        self._backlog: deque[OutgoingDatagram] = deque()
        # Data packets written by the core straight into the transport's send buffer, where
        # the transport offers that (``SocketDatagramIO.make_slots``; see
        # ``agent.core.send_slots``; the transport writes the headers): an optional extra of
        # the transport, looked up by name so in-memory transports need not have it.
        make_slots = getattr(self.io, "make_slots", None)
        self._send_slots: Callable[[SendSlots], int] | None = getattr(self.io, "send_slots", None)
        self._slots: SendSlots | None = None
        if make_slots is not None and self._send_slots is not None:
            self._slots = make_slots(self._flush_slots)
        self._handlers: dict[int, EventHandler] = {}
        self._closers: list[Callable[[], None]] = []
        self._closed = False
        self.unclaimed_events = 0
        #: Receive batches whose handling raised (a bug): each is dropped, the socket kept.
        self.receive_errors = 0
        #: A receive batch came back full this turn (more input may be waiting).
        self._input_waiting = False
        self._timer_deferrals = 0
        #: The latest send stopped at ``SEND_BURST``: the next turn must not wait.
        self._send_limited = False
        #: This host's ports, when followed (``watch_ports``; by default with real sockets).
        self.ports: PortWatch | None = None
        if watch_ports is None:
            watch_ports = datagram_io is None
        if watch_ports:
            ports: PortWatch | None = None
            try:
                ports = PortWatch(self.local_addresses)
                self.watch_ports(ports)
            except OSError as exc:
                if ports is not None:
                    ports.close()
                log.warning("cannot follow the planes' link state (netlink): %s", exc)

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

    def watch_ports(self, ports: PortWatch) -> None:
        """Follow this host's ports: a plane whose interface goes down is taken out of every
        connection at once and put back when it comes up (``agent.io.carrier``)."""
        ports.start(self.pool.set_plane_up)
        self.reactor.watch(ports, READ, ports.readable)
        self.status_providers["ports"] = ports.status
        self.ports = ports

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the runtime closes (listeners, sessions)."""
        self._closers.append(closer)

    def _source_ready(self, source: HasFileno) -> Callable[[int], None]:
        io = self.io
        pool = self.pool
        clock = self.clock

        def ready(_mask: int) -> None:
            batch: list[IncomingDatagram] = []
            if io.drain(source, batch.append, RECEIVE_BATCH) >= RECEIVE_BATCH:
                self._input_waiting = True  # a full batch: more may be waiting behind it
            if batch:
                # One reading for the batch, taken once it is read: the kernel held all of
                # it by then, and a reading per datagram would add to each the time spent on
                # the ones before it (RTT samples would grow with the batch).
                pool.receive_datagrams(batch, clock())

        return ready

    def _receive_failed(self, exc: BaseException) -> None:
        """A bug met while handling a receive batch costs that batch, never the agent (the
        peers retransmit what it held); logged on the first and every 1000th time."""
        self.receive_errors += 1
        if self.receive_errors % 1000 == 1:
            log.error("receive batch dropped (%d so far): %r", self.receive_errors, exc)

    # --- the loop -------------------------------------------------------------------------

    def turn(self, max_wait: float = MAX_IDLE_WAIT) -> None:
        """One iteration: wait (at most ``max_wait`` s), receive, run timers, dispatch events,
        send."""
        self.reactor.poll(self.wait_time(self.clock(), max_wait))
        self.service()

    def wait_time(self, now: float, max_wait: float = MAX_IDLE_WAIT) -> float:
        """How long the next turn may wait for input: none after a burst that used its limit
        (more is ready to send), else until the earliest deadline, at most ``max_wait``."""
        if self._send_limited:
            return 0.0
        deadline = _earliest(self.pool.next_timer(), self.reactor.next_deadline())
        if deadline is None:
            return max_wait
        return min(max(deadline - now, 0.0), max_wait)

    def service(self) -> None:
        """Everything after the wait: timers, events and sending (also after local calls
        that gave the core work, e.g. a new post)."""
        now = self.clock()
        core_deadline = self.pool.next_timer()
        if core_deadline is not None and core_deadline <= now:
            # The core's timers act on what it has heard: while a full receive batch says
            # more answers may wait in the socket, they wait a turn (the next poll returns at
            # once), lest a probe be judged lost, a packet given up or resent by the RTO, with
            # its answer unread. Bounded, so that a flood cannot hold them off.
            if self._input_waiting and self._timer_deferrals < MAX_TIMER_DEFERRALS:
                self._timer_deferrals += 1
            else:
                self._timer_deferrals = 0
                self.pool.handle_timer(now)
        self._input_waiting = False
        self.reactor.run_timers(now)
        self._dispatch_events()
        # Work the handlers posted while dispatching leaves here too; events it raises later
        # come out on a later turn.
        self._send(now)

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
            self._send_limited = False  # the socket's writability wakes the loop instead
            return
        slots = self._slots
        pool = self.pool
        datagrams = pool.datagrams_to_send(now, slots, SEND_BURST)
        self._send_limited = pool.data_sent_last_call >= SEND_BURST
        if datagrams and slots is not None and not backlog:
            # Control packets (SACKs, probes and their answers) join the data in the slots:
            # one system call per turn instead of two. Those that cannot (IPv6) stay datagrams.
            append = slots.append
            datagrams = [d for d in datagrams if not append(d)]
        if datagrams:
            # Slots filled up and flushed during the call may have met a full socket buffer:
            # then these queue behind them.
            index = self.io.send_many(datagrams, 0) if not backlog else 0
            if index < len(datagrams):
                self._queue(datagrams[index:])
        if slots is not None:
            slots.flush()

    def _flush_slots(self, slots: SendSlots) -> None:
        """The send slots' sink: send what they hold, unless datagrams are already waiting
        for the socket (then they queue behind, in order), and keep what the socket buffer
        could not take."""
        send_slots = self._send_slots
        assert send_slots is not None  # slots exist only with it
        start = 0 if self._backlog else send_slots(slots)
        if start < slots.count:
            self._queue([slots.datagram(slot) for slot in range(start, slots.count)])
        slots.clear()

    def _queue(self, datagrams: Sequence[OutgoingDatagram]) -> None:
        """Keep ``datagrams`` until the socket is writable (watching it if not yet)."""
        was_empty = not self._backlog
        self._backlog.extend(datagrams)
        if was_empty:
            self._watch_writable(True)

    def _drain_backlog(self) -> bool:
        backlog = self._backlog
        if backlog:
            waiting = list(backlog)
            index = self.io.send_many(waiting, 0)
            backlog.clear()
            if index < len(waiting):
                backlog.extend(waiting[index:])
                return False
        self._watch_writable(False)
        return True

    def _watch_writable(self, on: bool) -> None:
        for fd in self.io.send_waiters():
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
        if self._closed:
            return
        self._closed = True
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            closer()
        self.pool.close_all()
        self.io.close()
        if self.ports is not None:
            self.ports.close()
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
