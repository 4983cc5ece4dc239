"""A simulated host: one endpoint (MRC's ``Endpoint`` or the RoCE baseline's ``RoceEndpoint``)
driven exactly the way the socket runtime drives it.

After every input (a datagram delivered, a timer due) the host sends everything the endpoint
returns, collects its events with their simulated time, and re-arms a single timer at
``endpoint.next_timer()``. A timer that keeps firing at the same instant without the endpoint
moving it is a livelock bug in the core: the host raises instead of spinning forever.

A host can ``stall``: its process is off the CPU for a while, as an agent on a loaded machine
is. What reaches it meanwhile waits in its socket and its timers wait; when it runs again it
takes what arrived as one batch, as the runtime drains a socket.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.core.datagram import OutgoingDatagram
from agent.core.endpoint import Endpoint
from agent.core.events import Event
from agent.roce.endpoint import RoceEndpoint
from agent.sim.packet import SimPacket
from agent.sim.scheduler import Scheduler

#: Consecutive timer firings at one instant that count as a livelock.
_LIVELOCK_LIMIT = 1000


class SimHost:
    """An endpoint attached to the simulated network."""

    def __init__(
        self,
        name: str,
        endpoint: Endpoint | RoceEndpoint,
        scheduler: Scheduler,
        transmit: Callable[[SimHost, OutgoingDatagram], None],
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.events: list[tuple[float, Event]] = []
        #: Called with each event as it happens (an application reacting in simulated time);
        #: what it posts goes out on the next ``pump``, which it schedules itself.
        self.on_event: Callable[[float, Event], None] | None = None
        #: Datagrams the endpoint was handed and datagrams it produced (core work done).
        self.datagrams_in = 0
        self.datagrams_out = 0
        self._scheduler = scheduler
        self._transmit = transmit
        self._timer_at: float | None = None
        self._timer_token = 0
        self._same_instant = 0
        self._last_fire = -1.0
        self._stalled_until = -1.0
        self._held: list[SimPacket] = []
        self._pump_pending = False

    def stall(self, duration: float) -> None:
        """Take the host off the CPU for ``duration`` seconds from now."""
        until = self._scheduler.now + duration
        if until > self._stalled_until:
            self._stalled_until = until
            self._scheduler.at(until, self._resume)

    def _resume(self) -> None:
        now = self._scheduler.now
        if now < self._stalled_until:
            return  # stalled again meanwhile: a later resume takes over
        held, self._held = self._held, []
        if held:
            self.datagrams_in += len(held)
            self.endpoint.receive_datagrams([packet.received() for packet in held], now)
            self.pump()

    def receive(self, packet: SimPacket) -> None:
        """A datagram reached this host's NIC."""
        if self._scheduler.now < self._stalled_until:
            self._held.append(packet)
            return
        self.datagrams_in += 1
        self.endpoint.receive_datagram(packet.received(), self._scheduler.now)
        self.pump()

    def pump(self) -> None:
        """Send what the endpoint has, collect its events, re-arm its timer."""
        now = self._scheduler.now
        endpoint = self.endpoint
        datagrams = endpoint.datagrams_to_send(now)
        self.datagrams_out += len(datagrams)
        for datagram in datagrams:
            self._transmit(self, datagram)
        on_event = self.on_event
        event = endpoint.next_event()
        while event is not None:
            self.events.append((now, event))
            if on_event is not None:
                on_event(now, event)
            event = endpoint.next_event()
        deadline = endpoint.next_timer()
        if deadline is None:
            self._timer_at = None
            return
        deadline = max(deadline, now)
        if deadline == self._timer_at:
            return
        self._timer_at = deadline
        self._timer_token += 1
        token = self._timer_token
        self._scheduler.at(deadline, lambda: self._fire(token))

    def pump_soon(self) -> None:
        """Pump once what an application posted outside an input: at this instant, or when a
        stalled host runs again (an application posting from ``on_event`` calls this, since
        it cannot pump from inside the pump that called it)."""
        if self._pump_pending:
            return
        self._pump_pending = True
        self._scheduler.at(max(self._scheduler.now, self._stalled_until), self._pump_due)

    def _pump_due(self) -> None:
        if self._scheduler.now < self._stalled_until:  # stalled again meanwhile
            self._scheduler.at(self._stalled_until, self._pump_due)
            return
        self._pump_pending = False
        self.pump()

    def _fire(self, token: int) -> None:
        if token != self._timer_token:
            return
        now = self._scheduler.now
        if now < self._stalled_until:
            self._scheduler.at(self._stalled_until, lambda: self._fire(token))
            return
        if now == self._last_fire:
            self._same_instant += 1
            if self._same_instant > _LIVELOCK_LIMIT:
                raise RuntimeError(f"{self.name}: endpoint timer livelock at t={now}")
        else:
            self._same_instant = 0
            self._last_fire = now
        self._timer_at = None
        self.endpoint.handle_timer(now)
        self.pump()
