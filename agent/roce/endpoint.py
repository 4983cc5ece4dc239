"""The RoCE endpoint: what a RoCEv2 NIC is to its host, for the RC baseline.

It owns this host's addresses, its registered memory and its QPs, demultiplexed by
destination QP, and is driven exactly like MRC's ``agent.core.Endpoint``::

    endpoint.receive_datagrams(batch, now)   # RoCE datagrams received on UDP 4791
    endpoint.handle_timer(now)               # when now >= endpoint.next_timer()
    endpoint.datagrams_to_send(now)          # after either: send them all
    endpoint.next_event()                    # until None: completions, failures

so the runtime can hold one next to MRC's endpoints and hand it the datagrams whose opcode is
a standard one. Its events are ``agent.core``'s (``MessageAcked``, ``MessageFailed``,
``ConnectionFailed``, ``MessageReceived``, ``WriteRejected``), so the code that follows a
transfer does not care which transport carried it.

Input is never trusted: a datagram that is malformed, fails its ICRC, names an unknown QP or
comes from the wrong address is dropped and counted in ``stats.drops``; none of these raise.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Final

from agent.core.codec import DecodeError
from agent.core.datagram import IncomingDatagram, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.events import Event
from agent.core.memory import MemoryRegion, MemoryTable
from agent.core.send_slots import SendSlots
from agent.core.stats import ConnectionStats, EndpointStats
from agent.roce.codec import decode
from agent.roce.qp import RoceQp, RoceQpSpec, RoceStats
from wire.constants import ROCEV2_UDP_PORT

_MAX_QP: Final = 0xFFFFFF
_FIRST_QP: Final = 2  # QPs 0 and 1 are InfiniBand's special QPs


class RoceEndpoint:
    """A RoCE NIC over ``local_addresses``; each QP uses the one of its plane (one path per
    QP)."""

    def __init__(self, local_addresses: Sequence[bytes], *, seed: int = 0) -> None:
        addresses = tuple(bytes(a) for a in local_addresses)
        if not addresses:
            raise ValueError("an endpoint needs at least one local address")
        if {len(a) for a in addresses} not in ({4}, {16}):
            raise ValueError("local addresses must be all IPv4 (4 bytes) or all IPv6 (16 bytes)")
        self.local_addresses = addresses
        self._local = frozenset(addresses)
        self._rng = random.Random(seed)
        self.memory = MemoryTable(self._rng)
        self.stats = EndpointStats()
        self._qps: dict[int, RoceQp] = {}
        self._events: deque[Event] = deque()
        #: Data packets the latest ``datagrams_to_send`` call sent, over all QPs.
        self.data_sent_last_call = 0
        self._rotation = 0

    # --- setup ----------------------------------------------------------------------------

    def register_memory(self, buffer: bytearray | memoryview, va: int = 0) -> MemoryRegion:
        """Expose ``buffer`` to remote writes at ``va`` onwards; returns it with its R_Key."""
        return self.memory.register(buffer, va)

    def allocate_qp(self) -> int:
        """An unused QP number, to offer the peer before ``connect``."""
        while True:
            qp = self._rng.randint(_FIRST_QP, _MAX_QP)
            if qp not in self._qps:
                return qp

    def connect(self, spec: RoceQpSpec) -> None:
        """Open QP ``spec.local_qp`` towards the peer, straight into RTS."""
        if spec.local_qp in self._qps:
            raise ValueError(f"QP {spec.local_qp:#x} is already in use")
        if spec.local_qp < _FIRST_QP:
            raise ValueError("local QPs 0 and 1 are reserved")
        if spec.plane >= len(self.local_addresses):
            raise ValueError(
                f"plane {spec.plane} does not exist: this host has "
                f"{len(self.local_addresses)} plane(s)"
            )
        config = spec.config
        src_port = self._rng.randint(config.src_port_min, config.src_port_max)
        self._qps[spec.local_qp] = RoceQp(
            spec, self.local_addresses[spec.plane], src_port, self.memory, self._events.append
        )

    def close(self, qp: int) -> None:
        """Destroy QP ``qp``; its outstanding writes fail."""
        self._qp(qp).requester.close("connection closed locally")
        del self._qps[qp]

    @property
    def has_qps(self) -> bool:
        """Whether any QP exists (cheaper than ``connections``: asked per receive batch)."""
        return bool(self._qps)

    @property
    def connections(self) -> tuple[int, ...]:
        """The QPs that exist (in RTS or in the error state)."""
        return tuple(self._qps)

    def _qp(self, qp: int) -> RoceQp:
        found = self._qps.get(qp)
        if found is None:
            raise KeyError(f"no QP {qp:#x}")
        return found

    # --- application calls ----------------------------------------------------------------

    def post_write(
        self,
        qp: int,
        data: bytes | memoryview,
        remote_va: int,
        rkey: int,
        immediate: int | None = None,
    ) -> int:
        """RDMA-write ``data`` to the peer's ``remote_va`` in region ``rkey``; returns the MSN.

        Completion is ``MessageAcked`` or ``MessageFailed``. Raises ``SendQueueFull`` when the
        send queue is full, ``ConnectionClosed`` when the QP is in the error state."""
        return self._qp(qp).requester.post_write(data, remote_va, rkey, immediate)

    def can_post(self, qp: int) -> bool:
        """Whether ``post_write`` on ``qp`` would be accepted now."""
        return self._qp(qp).requester.can_post()

    def connection_stats(self, qp: int) -> ConnectionStats:
        """QP ``qp``'s statistics in the common form."""
        return self._qp(qp).stats()

    def roce_stats(self, qp: int) -> RoceStats:
        """QP ``qp``'s RC and DCQCN state."""
        return self._qp(qp).roce_stats()

    def next_event(self) -> Event | None:
        """The oldest event not yet taken, or None."""
        return self._events.popleft() if self._events else None

    # --- network and time -----------------------------------------------------------------

    def receive_datagrams(self, datagrams: Sequence[IncomingDatagram], now: float) -> None:
        """Process datagrams received by ``now``, in order; bad ones are dropped and counted."""
        stats = self.stats
        drops = stats.drops
        local = self._local
        qps = self._qps
        stats.datagrams_received += len(datagrams)
        for datagram in datagrams:
            if datagram.dst_port != ROCEV2_UDP_PORT:
                drops[DropReason.WRONG_PORT] += 1
                continue
            if datagram.ip.dst not in local:
                drops[DropReason.UNKNOWN_DESTINATION] += 1
                continue
            try:
                packet = decode(datagram.payload, datagram.ip, datagram.src_port, ROCEV2_UDP_PORT)
            except DecodeError as error:
                drops[error.reason] += 1
                continue
            qp = qps.get(packet.dest_qp)
            if qp is None:
                drops[DropReason.UNKNOWN_QP] += 1
                continue
            if datagram.ip.dst != qp.local_address:
                drops[DropReason.UNKNOWN_DESTINATION] += 1
                continue
            reason = qp.receive(packet, datagram, now)
            if reason is not None:
                drops[reason] += 1

    def receive_datagram(self, datagram: IncomingDatagram, now: float) -> None:
        """Process one datagram (see ``receive_datagrams``)."""
        self.receive_datagrams((datagram,), now)

    def datagrams_to_send(
        self, now: float, slots: SendSlots | None = None, limit: int | None = None
    ) -> list[OutgoingDatagram]:
        """Every datagram that may leave at ``now``: each QP's answers, and its data as its
        pacer allows, at most ``limit`` data packets in all (which QP goes first turns with
        each call). ``slots`` is accepted for the runtime's sake and not written: the
        runtime copies these datagrams into its send batch itself."""
        out: list[OutgoingDatagram] = []
        qps = list(self._qps.values())
        count = len(qps)
        start = self._rotation % count if count else 0
        self._rotation = start + 1
        remaining = limit
        sent = 0
        for index in range(count):
            qp = qps[(start + index) % count]
            out.extend(qp.datagrams_to_send(now, remaining))
            sent += qp.data_sent_last_call
            if remaining is not None:
                remaining -= qp.data_sent_last_call
        self.data_sent_last_call = sent
        self.stats.datagrams_sent += len(out)
        return out

    def handle_timer(self, now: float) -> None:
        """Run every timer due at ``now``."""
        for qp in self._qps.values():
            qp.handle_timer(now)

    def next_timer(self) -> float | None:
        """When ``handle_timer`` or the pacer next has work (None: nothing scheduled)."""
        earliest: float | None = None
        for qp in self._qps.values():
            deadline = qp.next_timer()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest
