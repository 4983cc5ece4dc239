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

The RoCE baseline (``agent.roce``) lives here too, as one ``RoceEndpoint`` made for the first
RoCE QP the side channel sets up. While it holds a QP, each datagram's first byte, the BTH
opcode, says whose it is: MRC's opcodes are all at or above ``MRC_OPCODE_MIN`` (InfiniBand's
vendor range), RoCE's standard ones below; the RoCE endpoint then finds the QP. Without a
RoCE QP that test is not made at all, so MRC's receive path is the same as without RoCE.
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
from agent.roce import RoceEndpoint, RoceQpSpec
from wire.constants import MRC_OPCODE_MIN

_QP_OFFSET = 5
_QP_END = 8


class EndpointPool:
    """Endpoints by configuration, and which one owns each QP."""

    def __init__(self, local_addresses: Sequence[bytes], config: MrcConfig, seed: int) -> None:
        self.local_addresses = tuple(local_addresses)
        self.default = Endpoint(self.local_addresses, config, seed=seed)
        self._seed = seed
        self._by_config: dict[MrcConfig, Endpoint] = {config: self.default}
        self._owner: dict[int, Endpoint | RoceEndpoint] = {}
        self._roce: RoceEndpoint | None = None
        self._reserved: set[int] = set()
        #: Per plane: its link is up (``set_plane_up``), the operator left it enabled.
        self._carrier_state = [True] * len(self.local_addresses)
        self._admin_state = [True] * len(self.local_addresses)
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
            # One memory table for the pool: a region registered once (the host API's) is
            # writable by whichever endpoint holds the QP its peer writes through.
            endpoint.memory = self.default.memory
            for plane, up in enumerate(self._planes_up()):
                if not up:
                    endpoint.set_plane_up(plane, False)
            self._by_config[config] = endpoint
        return endpoint

    @property
    def roce(self) -> RoceEndpoint:
        """The RoCE baseline's endpoint on the same addresses (created on first use)."""
        if self._roce is None:
            self._roce = RoceEndpoint(self.local_addresses, seed=self._seed ^ 0x524F4345)
            # The pool's one memory table, as for every MRC endpoint (one NIC, one table).
            self._roce.memory = self.default.memory
        return self._roce

    def _roce_active(self) -> RoceEndpoint | None:
        """The RoCE endpoint while it holds a QP (its datagrams must be sorted out)."""
        roce = self._roce
        return roce if roce is not None and roce.has_qps else None

    def allocate_qp(self, endpoint: Endpoint | RoceEndpoint) -> int:
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

    def connect_roce(self, spec: RoceQpSpec) -> None:
        """Open a RoCE QP and route its QP number to the RoCE endpoint."""
        roce = self.roce
        roce.connect(spec)
        self._reserved.discard(spec.local_qp)
        self._owner[spec.local_qp] = roce

    @property
    def qps(self) -> tuple[int, ...]:
        """Every open connection's QP, MRC's and RoCE's."""
        return tuple(self._owner)

    def owner(self, qp: int) -> Endpoint | RoceEndpoint:
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
        roce = self._roce_active()
        if roce is not None and datagram.payload[:1] and datagram.payload[0] < MRC_OPCODE_MIN:
            roce.receive_datagram(datagram, now)
            return
        endpoint: Endpoint = self.default
        if len(self._by_config) > 1:
            payload = datagram.payload
            if len(payload) >= _QP_END:
                qp = int.from_bytes(payload[_QP_OFFSET:_QP_END], "big")
                owner = self._owner.get(qp, endpoint)
                if isinstance(owner, Endpoint):
                    endpoint = owner
        endpoint.receive_datagram(datagram, now)

    def receive_datagrams(self, datagrams: Sequence[IncomingDatagram], now: float) -> None:
        """Hand a batch of datagrams received by ``now`` to the endpoints owning them."""
        roce = self._roce_active()
        if roce is not None:
            datagrams = self._sort_out_roce(datagrams, roce, now)
        if len(self._by_config) == 1:
            self.default.receive_datagrams(datagrams, now)
            return
        for datagram in datagrams:
            self.receive_datagram(datagram, now)

    @staticmethod
    def _sort_out_roce(
        datagrams: Sequence[IncomingDatagram], roce: RoceEndpoint, now: float
    ) -> list[IncomingDatagram]:
        """Hand the RoCE datagrams of a batch to ``roce``; the rest are MRC's (or nobody's:
        an empty one goes to MRC's endpoint, which counts it)."""
        mrc: list[IncomingDatagram] = []
        standard: list[IncomingDatagram] = []
        for datagram in datagrams:
            payload = datagram.payload
            if payload and payload[0] < MRC_OPCODE_MIN:
                standard.append(datagram)
            else:
                mrc.append(datagram)
        if standard:
            roce.receive_datagrams(standard, now)
        return mrc

    def handle_timer(self, now: float) -> None:
        """Run the timers due at ``now`` in every endpoint."""
        for endpoint in self._by_config.values():
            deadline = endpoint.next_timer()
            if deadline is not None and deadline <= now:
                endpoint.handle_timer(now)
        roce = self._roce_active()
        if roce is not None:
            roce.handle_timer(now)

    def next_timer(self) -> float | None:
        """The earliest core deadline of the pool."""
        earliest: float | None = None
        for endpoint in self._by_config.values():
            deadline = endpoint.next_timer()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        roce = self._roce_active()
        if roce is not None:
            deadline = roce.next_timer()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def datagrams_to_send(
        self, now: float, slots: SendSlots | None = None, limit: int | None = None
    ) -> list[OutgoingDatagram]:
        """Everything every endpoint may send at ``now`` (data into ``slots`` where given),
        at most ``limit`` data packets in all (see ``Endpoint.datagrams_to_send``;
        ``data_sent_last_call`` says how many went)."""
        roce = self._roce_active()
        if len(self._by_config) == 1 and roce is None:
            out = self.default.datagrams_to_send(now, slots, limit)
            self.data_sent_last_call = self.default.data_sent_last_call
            return out
        out = []
        data_sent = 0
        for endpoint in self._by_config.values():
            remaining = None if limit is None else max(limit - data_sent, 0)
            out.extend(endpoint.datagrams_to_send(now, slots, remaining))
            data_sent += endpoint.data_sent_last_call
        if roce is not None:
            remaining = None if limit is None else max(limit - data_sent, 0)
            out.extend(roce.datagrams_to_send(now, None, remaining))
            data_sent += roce.data_sent_last_call
        self.data_sent_last_call = data_sent
        return out

    def next_event(self) -> Event | None:
        """The next event of any endpoint, or None."""
        for endpoint in self._by_config.values():
            event = endpoint.next_event()
            if event is not None:
                return event
        if self._roce is not None:
            return self._roce.next_event()
        return None

    def drops(self) -> dict[str, int]:
        """Datagrams the core dropped, by reason, summed over the pool (non-zero only)."""
        totals: dict[DropReason, int] = {}
        endpoints: list[Endpoint | RoceEndpoint] = list(self._by_config.values())
        if self._roce is not None:
            endpoints.append(self._roce)
        for endpoint in endpoints:
            for reason, count in endpoint.stats.drops.items():
                totals[reason] = totals.get(reason, 0) + count
        return {reason.value: count for reason, count in totals.items() if count}

    def set_plane_up(self, plane: int, up: bool) -> None:
        """A local port went up or down: every endpoint follows (a port also disabled by
        the operator, ``set_plane_admin``, stays down)."""
        self._carrier()[plane] = up
        self._apply_plane(plane)

    def set_plane_admin(self, plane: int, enabled: bool) -> None:
        """The operator enabled or disabled the port of ``plane`` (the host API's port
        admin state): disabled, it is down for every connection whatever its link says."""
        self._admin()[plane] = enabled
        self._apply_plane(plane)

    def plane_admin(self, plane: int) -> bool:
        """Whether the operator left the port of ``plane`` enabled."""
        return self._admin()[plane]

    def plane_up(self, plane: int) -> bool:
        """Whether ``plane`` is in use: its link up and its port enabled."""
        return self._planes_up()[plane]

    def _carrier(self) -> list[bool]:
        return self._carrier_state

    def _admin(self) -> list[bool]:
        return self._admin_state

    def _planes_up(self) -> list[bool]:
        return [link and admin for link, admin in zip(self._carrier(), self._admin(), strict=True)]

    def _apply_plane(self, plane: int) -> None:
        up = self._planes_up()[plane]
        for endpoint in self._by_config.values():
            endpoint.set_plane_up(plane, up)
