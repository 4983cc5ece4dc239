"""Two endpoints wired back to back by hand, for tests that must control every datagram.

Each ``exchange`` advances the clock by one one-way delay, hands every datagram sent since the
last exchange to its peer (unless the test drops or rewrites it), then runs due timers and
collects what the endpoints send next. No simulator: the test decides each packet's fate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent.core import (
    ConnectionSpec,
    Endpoint,
    Event,
    IncomingDatagram,
    MrcConfig,
    OutgoingDatagram,
)
from agent.core.codec import decode
from agent.core.packets import Packet

ONE_WAY = 50e-6


@dataclass
class Flight:
    """A datagram on its way: who sent it, and what it is."""

    source: Endpoint
    datagram: OutgoingDatagram

    def packet(self) -> Packet:
        """The MRC packet it carries (decoded with its own context)."""
        d = self.datagram
        return decode(d.payload, d.ip, d.src_port, d.dst_port)


@dataclass
class Loopback:
    """Endpoint ``a`` (sender side of the tests) and ``b`` (receiver), one connection."""

    a: Endpoint
    b: Endpoint
    qp_a: int
    qp_b: int
    rkey: int
    va: int
    now: float = 0.0
    in_flight: list[Flight] = field(default_factory=list)
    events_a: list[Event] = field(default_factory=list)
    events_b: list[Event] = field(default_factory=list)
    delivered: list[Flight] = field(default_factory=list)

    @classmethod
    def create(cls, config: MrcConfig | None = None, planes: int = 1) -> Loopback:
        config = config or MrcConfig(ev_set_size=8)
        a = Endpoint([bytes([10, p, 0, 1]) for p in range(planes)], config, seed=1)
        b = Endpoint([bytes([10, p, 0, 2]) for p in range(planes)], config, seed=2)
        region = b.register_memory(bytearray(1 << 20), va=0x4000)
        qp_a, qp_b = a.allocate_qp(), b.allocate_qp()
        a.connect(ConnectionSpec(qp_a, qp_b, b.local_addresses, send_psn=5, receive_psn=9))
        b.connect(ConnectionSpec(qp_b, qp_a, a.local_addresses, send_psn=9, receive_psn=5))
        return cls(a, b, qp_a, qp_b, region.rkey, region.va)

    def post(self, data: bytes, offset: int = 0, immediate: int | None = None) -> int:
        msn = self.a.post_write(self.qp_a, data, self.va + offset, self.rkey, immediate)
        self.collect()
        return msn

    def collect(self) -> None:
        for endpoint in (self.a, self.b):
            for datagram in endpoint.datagrams_to_send(self.now):
                self.in_flight.append(Flight(endpoint, datagram))
        self._drain_events()

    def _drain_events(self) -> None:
        for endpoint, log in ((self.a, self.events_a), (self.b, self.events_b)):
            event = endpoint.next_event()
            while event is not None:
                log.append(event)
                event = endpoint.next_event()

    def exchange(
        self,
        drop: Callable[[Flight], bool] = lambda flight: False,
        rewrite: Callable[[Flight, IncomingDatagram], IncomingDatagram] | None = None,
        delay: float = ONE_WAY,
    ) -> list[Flight]:
        """One one-way delay: deliver what is in flight, run timers, collect new output."""
        self.now += delay
        flights, self.in_flight = self.in_flight, []
        for flight in flights:
            if drop(flight):
                continue
            incoming = to_incoming(flight.datagram)
            if rewrite is not None:
                incoming = rewrite(flight, incoming)
            target = self.b if flight.source is self.a else self.a
            self.delivered.append(flight)
            target.receive_datagram(incoming, self.now)
        for endpoint in (self.a, self.b):
            deadline = endpoint.next_timer()
            if deadline is not None and deadline <= self.now:
                endpoint.handle_timer(self.now)
        self.collect()
        return flights

    def run(self, duration: float, **kwargs: object) -> None:
        end = self.now + duration
        while self.now < end:
            self.exchange(**kwargs)  # type: ignore[arg-type]

    def idle_until_timer(self) -> None:
        """Jump to the next timer of either endpoint (nothing in flight)."""
        deadlines = [t for t in (self.a.next_timer(), self.b.next_timer()) if t is not None]
        self.now = max(self.now, min(deadlines))
        for endpoint in (self.a, self.b):
            deadline = endpoint.next_timer()
            if deadline is not None and deadline <= self.now:
                endpoint.handle_timer(self.now)
        self.collect()


def to_incoming(datagram: OutgoingDatagram) -> IncomingDatagram:
    """What the peer's stack reports for ``datagram`` (no switch in between)."""
    return IncomingDatagram(
        payload=datagram.payload,
        ip=datagram.ip,
        src_port=datagram.src_port,
        dscp=datagram.dscp,
        ecn=datagram.ecn,
        flow_label=datagram.flow_label,
        dst_port=datagram.dst_port,
    )
