"""Several core endpoints behind one UDP port, so connections can differ in configuration.

The core's ``Endpoint`` holds one ``MrcConfig`` for all its connections, but ``mrc-perf --evs 1
--cc dcqcn`` wants one connection with its own EV count and congestion control while the
host's agent keeps serving others with the defaults. A NIC would do that per QP; here the
runtime keeps one ``Endpoint`` per distinct configuration, all on the same plane addresses,
and hands each received datagram to the endpoint that owns its destination QP. QP numbers are
unique across the pool, so the owner is always unambiguous.

The only thing read from a datagram here is the BTH destination QP (bytes 5-7 of every MRC
packet), to pick the owner; everything else, including rejecting a malformed datagram, is the
core's job. Datagrams too short to name a QP, or naming no known QP, go to the default
endpoint, which drops and counts them.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.core import (
    ConnectionSpec,
    ConnectionStats,
    Endpoint,
    Event,
    IncomingDatagram,
    MrcConfig,
    OutgoingDatagram,
)
from agent.core.drops import DropReason
from agent.core.send_slots import SendSlots

_QP_OFFSET = 5
_QP_END = 8


class EndpointPool:
    """Endpoints by configuration, and which one owns each QP."""

    def __init__(self, local_addresses: Sequence[bytes], config: MrcConfig, seed: int) -> None:
        self.local_addresses = tuple(local_addresses)
        self.default = Endpoint(self.local_addresses, config, seed=seed)
        self._seed = seed
        self._by_config: dict[MrcConfig, Endpoint] = {config: self.default}
        self._owner: dict[int, Endpoint] = {}
        self._reserved: set[int] = set()
        #: Data packets the latest ``datagrams_to_send`` call sent, over all endpoints.
        self.data_sent_last_call = 0

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """Every endpoint in the pool, the default first."""
        return tuple(self._by_config.values())

    def endpoint_for(self, config: MrcConfig | None) -> Endpoint:
        """The endpoint running ``config`` (the default for None), created on first use."""
        if config is None:
            return self.default
        endpoint = self._by_config.get(config)
        if endpoint is None:
            endpoint = Endpoint(
                self.local_addresses, config, seed=self._seed + len(self._by_config)
            )
            self._by_config[config] = endpoint
        return endpoint

    def allocate_qp(self, endpoint: Endpoint) -> int:
        """A QP number unused by every endpoint of the pool, reserved until ``connect`` or
        ``release_qp`` (the side channel offers it to the peer before connecting)."""
        while True:
            qp = endpoint.allocate_qp()
            if qp not in self._owner and qp not in self._reserved:
                self._reserved.add(qp)
                return qp

    def release_qp(self, qp: int) -> None:
        """Give back a reserved QP whose connection never opened."""
        self._reserved.discard(qp)

    def connect(self, endpoint: Endpoint, spec: ConnectionSpec) -> None:
        """Open a connection on ``endpoint`` and route its QP there."""
        endpoint.connect(spec)
        self._reserved.discard(spec.local_qp)
        self._owner[spec.local_qp] = endpoint

    def owner(self, qp: int) -> Endpoint:
        """The endpoint holding connection ``qp`` (``KeyError`` if none)."""
        return self._owner[qp]

    def close(self, qp: int) -> None:
        """Close connection ``qp`` wherever it lives (no error if it is already gone)."""
        endpoint = self._owner.pop(qp, None)
        if endpoint is not None and qp in endpoint.connections:
            endpoint.close(qp)

    def close_all(self) -> None:
        """Close every connection of the pool."""
        for qp in list(self._owner):
            self.close(qp)

    def connection_stats(self, qp: int) -> ConnectionStats:
        """Statistics of connection ``qp``."""
        return self._owner[qp].connection_stats(qp)

    def receive_datagram(self, datagram: IncomingDatagram, now: float) -> None:
        """Hand a datagram to the endpoint owning its destination QP."""
        endpoint = self.default
        if len(self._by_config) > 1:
            payload = datagram.payload
            if len(payload) >= _QP_END:
                qp = int.from_bytes(payload[_QP_OFFSET:_QP_END], "big")
                endpoint = self._owner.get(qp, endpoint)
        endpoint.receive_datagram(datagram, now)

    def receive_datagrams(self, datagrams: Sequence[IncomingDatagram], now: float) -> None:
        """Hand a batch of datagrams received by ``now`` to the endpoints owning them."""
        if len(self._by_config) == 1:
            self.default.receive_datagrams(datagrams, now)
            return
        for datagram in datagrams:
            self.receive_datagram(datagram, now)

    def handle_timer(self, now: float) -> None:
        """Run the timers due at ``now`` in every endpoint."""
        for endpoint in self._by_config.values():
            deadline = endpoint.next_timer()
            if deadline is not None and deadline <= now:
                endpoint.handle_timer(now)

    def next_timer(self) -> float | None:
        """The earliest core deadline of the pool."""
        earliest: float | None = None
        for endpoint in self._by_config.values():
            deadline = endpoint.next_timer()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def datagrams_to_send(
        self, now: float, slots: SendSlots | None = None, limit: int | None = None
    ) -> list[OutgoingDatagram]:
        """Everything every endpoint may send at ``now`` (data into ``slots`` where given),
        at most ``limit`` data packets in all (see ``Endpoint.datagrams_to_send``;
        ``data_sent_last_call`` says how many went)."""
        if len(self._by_config) == 1:
            out = self.default.datagrams_to_send(now, slots, limit)
            self.data_sent_last_call = self.default.data_sent_last_call
            return out
        out = []
        data_sent = 0
        for endpoint in self._by_config.values():
            remaining = None if limit is None else max(limit - data_sent, 0)
            out.extend(endpoint.datagrams_to_send(now, slots, remaining))
            data_sent += endpoint.data_sent_last_call
        self.data_sent_last_call = data_sent
        return out

    def next_event(self) -> Event | None:
        """The next event of any endpoint, or None."""
        for endpoint in self._by_config.values():
            event = endpoint.next_event()
            if event is not None:
                return event
        return None

    def drops(self) -> dict[str, int]:
        """Datagrams the core dropped, by reason, summed over the pool (non-zero only)."""
        totals: dict[DropReason, int] = {}
        for endpoint in self._by_config.values():
            for reason, count in endpoint.stats.drops.items():
                totals[reason] = totals.get(reason, 0) + count
        return {reason.value: count for reason, count in totals.items() if count}

    def set_plane_up(self, plane: int, up: bool) -> None:
        """A local port went up or down: every endpoint follows."""
        for endpoint in self._by_config.values():
            endpoint.set_plane_up(plane, up)
