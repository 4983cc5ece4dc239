"""The MRC endpoint: the entry point of the sans-IO core (shaped like aioquic's QuicConnection).

An endpoint is what a NIC is in hardware: it owns this host's planes (one local address each),
its registered memory and many connections, demultiplexed by destination QP. The caller owns
time and I/O and drives it with four calls::

    endpoint.receive_datagram(datagram, now)   # each datagram received on UDP 4791
                                               # (or receive_datagrams(batch, now))
    endpoint.handle_timer(now)                 # when now >= endpoint.next_timer()
    endpoint.datagrams_to_send(now)            # after either of the above: send them all
    endpoint.next_event()                      # until None: completions, failures

Data packets received between two ``datagrams_to_send`` calls are answered by one SACK
(``MrcConfig.sack_coalesce_max`` bounds how many), so a caller that hands over a batch of
datagrams before asking for output gets one SACK per batch, and one that asks after every
datagram gets one per packet.

Connectionless EV probes (the host API's ``mrc_ctl_ep_batch_send_wait``): ``send_ev_probe``
sends an endpoint request addressed to QP 0 on a chosen EV, the peer's endpoint answers it
without any connection, and the answer comes out as an ``EvProbeAnswered`` event with its RTT.
A probe nobody answers is the caller's to give up (``cancel_ev_probe``).

Input is never trusted: a datagram that is malformed, fails its ICRC, names an unknown QP, comes
from the wrong address, lies outside the PSN window or writes where it may not is dropped and
counted in ``stats.drops``; none of these raise.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Final

from agent.core.codec import (
    DATA_OPCODE_SET,
    MIN_WHOLE_DATA,
    DecodeError,
    decode,
    decode_whole_data_fields,
    encode,
)
from agent.core.config import MrcConfig
from agent.core.connection import Connection, ConnectionSpec
from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.events import Event, EvProbeAnswered
from agent.core.memory import MemoryRegion, MemoryTable
from agent.core.packets import EndpointMessage
from agent.core.send_slots import SendSlots
from agent.core.stats import ConnectionStats, EndpointStats
from wire.constants import ECN_NOT_ECT, ROCEV2_UDP_PORT, EpType, EvState
from wire.entropy import MAX_EV, ev_flow_label, ev_source_port

_MAX_QP: Final = 0xFFFFFF
_FIRST_QP: Final = 2  # QPs 0 and 1 are InfiniBand's special QPs
#: The QP connectionless endpoint requests are addressed to (no connection has it).
CONNECTIONLESS_QP: Final = 0
#: Connectionless probes awaiting an answer, at most: each costs a table entry until the
#: caller cancels it, so a runaway caller is refused rather than grow it without bound.
MAX_PENDING_PROBES: Final = 4096
_EV_PROBE: Final = int(EpType.EV_PROBE)


class Endpoint:
    """An MRC endpoint over one or more planes.

    ``local_addresses[p]`` is this host's (packed) address on plane p; all must be IPv4 or all
    IPv6. ``seed`` makes EV choice and key generation reproducible (the simulator relies on it).
    """

    def __init__(
        self,
        local_addresses: Sequence[bytes],
        config: MrcConfig | None = None,
        *,
        seed: int = 0,
    ) -> None:
        addresses = tuple(bytes(a) for a in local_addresses)
        if not addresses:
            raise ValueError("an endpoint needs at least one local address (one per plane)")
        sizes = {len(a) for a in addresses}
        if sizes not in ({4}, {16}):
            raise ValueError("local addresses must be all IPv4 (4 bytes) or all IPv6 (16 bytes)")
        if len(set(addresses)) != len(addresses):
            raise ValueError("each plane needs its own local address")
        self.config = config or MrcConfig()
        self.local_addresses = addresses
        self._plane_of = {address: plane for plane, address in enumerate(addresses)}
        self._planes_up = [True] * len(addresses)
        self._rng = random.Random(seed)
        self.memory = MemoryTable(self._rng)
        self.stats = EndpointStats()
        self._connections: dict[int, Connection] = {}
        self._events: deque[Event] = deque()
        #: Data packets the latest ``datagrams_to_send`` call sent, over all connections (as
        #: many as its ``limit``: more data may be ready to go at once).
        self.data_sent_last_call = 0
        self._send_rotation = 0
        self._trimmed_dscps = (self.config.dscp.trimmed, self.config.dscp.trimmed_lasthop)
        #: Connectionless probes sent and not answered: seq -> (plane, peer, EV, sent at).
        self._probes: dict[int, tuple[int, bytes, int, float]] = {}
        #: Connectionless datagrams (probes and their answers) waiting to go out.
        self._connectionless_out: list[OutgoingDatagram] = []

    # --- setup ----------------------------------------------------------------------------

    @property
    def planes(self) -> int:
        """Number of planes (local addresses)."""
        return len(self.local_addresses)

    def register_memory(
        self, buffer: bytearray | memoryview, va: int = 0, pd: int = 0
    ) -> MemoryRegion:
        """Expose ``buffer`` to remote writes at ``va`` onwards, to the connections of
        protection domain ``pd``; returns it with its R_Key."""
        return self.memory.register(buffer, va, pd)

    def allocate_qp(self) -> int:
        """An unused QP number, to offer the peer before ``connect``."""
        while True:
            qp = self._rng.randint(_FIRST_QP, _MAX_QP)
            if qp not in self._connections:
                return qp

    def connect(self, spec: ConnectionSpec) -> None:
        """Open a connection as agreed with the peer."""
        if spec.local_qp in self._connections:
            raise ValueError(f"QP {spec.local_qp:#x} is already in use")
        if not _FIRST_QP <= spec.local_qp <= _MAX_QP or not 0 <= spec.remote_qp <= _MAX_QP:
            raise ValueError("QP numbers are 24-bit (local QPs 0 and 1 are reserved)")
        if len(spec.remote_addresses) != self.planes:
            raise ValueError(
                f"{len(spec.remote_addresses)} peer addresses for {self.planes} planes"
            )
        if any(len(a) != len(self.local_addresses[0]) for a in spec.remote_addresses):
            raise ValueError("peer addresses must be of the same IP version as local ones")
        self._connections[spec.local_qp] = Connection(
            spec,
            self.local_addresses,
            self._planes_up,
            self.config,
            self.memory,
            random.Random(self._rng.getrandbits(64)),
            self._events,
        )

    def close(self, qp: int) -> None:
        """Close connection ``qp``; its unconfirmed messages fail."""
        connection = self._connection(qp)
        connection.close("connection closed locally")
        del self._connections[qp]

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

        Completion is the ``MessageAcked`` event (the receiver confirmed every byte) or
        ``MessageFailed``. Raises ``SendQueueFull`` when the oldest unconfirmed message is
        ``max_unconfirmed_messages`` messages back, ``ConnectionClosed`` on a dead
        connection, ``ValueError`` for impossible arguments.
        """
        return self._connection(qp).post_write(data, remote_va, rkey, immediate)

    def set_send_psn(self, qp: int, psn: int) -> None:
        """Start ``qp``'s send PSNs at ``psn`` (before anything was posted on it)."""
        self._connection(qp).sender.set_initial_psn(psn)

    def set_peer_timeout(self, qp: int, seconds: float | None) -> None:
        """Fail ``qp`` after ``seconds`` of its peer's silence with work outstanding, in place
        of the configured ``peer_timeout`` (None: never for silence)."""
        self._connection(qp).set_peer_timeout(seconds)

    def can_post(self, qp: int) -> bool:
        """Whether ``post_write`` on ``qp`` would be accepted now."""
        connection = self._connection(qp)
        return not connection.closed and connection.sender.can_post()

    def set_plane_up(self, plane: int, up: bool) -> None:
        """This host's port on ``plane`` went up or down (peers are told via PORT_STATUS)."""
        self._planes_up[plane] = up
        for connection in self._connections.values():
            connection.set_local_plane_up(plane, up)

    def retire_ev(self, qp: int, plane: int, ev: int, now: float) -> None:
        """Operator: treat home EV ``ev`` of ``plane`` on ``qp`` as ASSUMED_BAD now."""
        self._connection(qp).ev_set.force_retire(plane, ev, now)

    def admit_ev(self, qp: int, plane: int, ev: int) -> None:
        """Operator: home EV ``ev`` of ``plane`` on ``qp`` is GOOD now (no probes)."""
        self._connection(qp).ev_set.force_good(plane, ev)

    def ev_states(self, qp: int) -> list[tuple[int, int, EvState]]:
        """Every home EV of ``qp`` as (plane, EV, state)."""
        return self._connection(qp).ev_set.homes()

    # --- connectionless EV probes ---------------------------------------------------------

    def send_ev_probe(self, plane: int, peer: bytes, ev: int, seq: int, now: float) -> None:
        """Probe ``peer`` (an address of the local address family) from ``plane`` on EV ``ev``
        (32 bits: source port and flow label); the answer is an ``EvProbeAnswered`` event
        with sequence number ``seq`` (16 bits, unique among the probes awaiting an answer).
        ``ValueError`` for anything that cannot go on the wire."""
        if not 0 <= plane < self.planes:
            raise ValueError(f"no plane {plane}: this endpoint has {self.planes}")
        if len(peer) != len(self.local_addresses[0]):
            raise ValueError("the probed address must be of the local addresses' IP version")
        if not 0 <= seq <= 0xFFFF:
            raise ValueError(f"probe sequence numbers are 16 bits, got {seq}")
        if seq in self._probes:
            raise ValueError(f"probe {seq} is already awaiting an answer")
        if not 0 <= ev <= MAX_EV or ev_source_port(ev) == 0:
            raise ValueError(f"EV {ev:#x} is not a 32-bit EV with a non-zero source port")
        if len(self._probes) >= MAX_PENDING_PROBES:
            raise ValueError(f"{MAX_PENDING_PROBES} probes already await an answer")
        self._probes[seq] = (plane, bytes(peer), ev, now)
        message = EndpointMessage(CONNECTIONLESS_QP, 0, False, _EV_PROBE, seq, ev)
        self._queue_connectionless(message, plane, bytes(peer), ev)

    def cancel_ev_probe(self, seq: int) -> None:
        """Give up waiting for probe ``seq`` (a late answer is then dropped as unexpected)."""
        self._probes.pop(seq, None)

    def _queue_connectionless(
        self, message: EndpointMessage, plane: int, peer: bytes, ev: int
    ) -> None:
        ip = IpContext(src=self.local_addresses[plane], dst=peer)
        src_port = ev_source_port(ev)
        payload = encode(message, ip, src_port)
        self._connectionless_out.append(
            OutgoingDatagram(
                payload,
                ip,
                plane,
                src_port,
                ev_flow_label(ev),
                self.config.dscp.control,
                ECN_NOT_ECT,
            )
        )

    def _on_connectionless(
        self, packet: EndpointMessage, datagram: IncomingDatagram, plane: int, now: float
    ) -> DropReason | None:
        """An endpoint request or response addressed to QP 0."""
        if packet.ep_type != _EV_PROBE or packet.more_answers:
            return DropReason.UNKNOWN_QP
        if not packet.response:
            answer = EndpointMessage(
                CONNECTIONLESS_QP, 0, True, _EV_PROBE, packet.seq, packet.value
            )
            self._queue_connectionless(answer, plane, datagram.ip.src, datagram.ev)
            return None
        pending = self._probes.get(packet.seq)
        if pending is None:
            return DropReason.UNEXPECTED
        sent_plane, peer, ev, sent_at = pending
        if sent_plane != plane or peer != datagram.ip.src or ev != packet.value:
            return DropReason.UNEXPECTED
        del self._probes[packet.seq]
        self._events.append(
            EvProbeAnswered(CONNECTIONLESS_QP, packet.seq, plane, ev, max(now - sent_at, 0.0))
        )
        return None

    def deny_ev(self, qp: int, plane: int, ev: int, now: float) -> None:
        """Operator: stop using home EV ``ev`` of ``plane`` on ``qp`` (state DENIED)."""
        self._connection(qp).ev_set.deny(plane, ev, now)

    def allow_ev(self, qp: int, plane: int, ev: int, now: float) -> None:
        """Operator: lift a denial; the EV returns after passing its probes."""
        self._connection(qp).ev_set.allow(plane, ev, now)

    def connection_stats(self, qp: int) -> ConnectionStats:
        """A snapshot of connection ``qp``'s statistics."""
        return self._connection(qp).stats()

    def remote_addresses(self, qp: int) -> tuple[bytes, ...]:
        """Connection ``qp``'s peer address on each plane."""
        return self._connection(qp).remote_addresses

    @property
    def connections(self) -> tuple[int, ...]:
        """The local QPs of the open connections."""
        return tuple(self._connections)

    def next_event(self) -> Event | None:
        """The oldest event not yet taken, or None."""
        return self._events.popleft() if self._events else None

    def _connection(self, qp: int) -> Connection:
        connection = self._connections.get(qp)
        if connection is None:
            raise KeyError(f"no connection with QP {qp:#x}")
        return connection

    # --- network and time -----------------------------------------------------------------

    def receive_datagram(self, datagram: IncomingDatagram, now: float) -> None:
        """Process one received datagram. Never raises on bad input: drops and counts it."""
        self.receive_datagrams((datagram,), now)

    def receive_datagrams(self, datagrams: Sequence[IncomingDatagram], now: float) -> None:
        """Process datagrams received by ``now``, in order, as ``receive_datagram`` does each
        (the runtime hands over what one system call read: one call per batch, not per
        datagram, on the per-packet path)."""
        stats = self.stats
        drops = stats.drops
        plane_of = self._plane_of
        trimmed_dscps = self._trimmed_dscps
        connections = self._connections
        data_opcodes = DATA_OPCODE_SET
        stats.datagrams_received += len(datagrams)
        for datagram in datagrams:
            if datagram.dst_port != ROCEV2_UDP_PORT:
                drops[DropReason.WRONG_PORT] += 1
                continue
            plane = plane_of.get(datagram.ip.dst)
            if plane is None:
                drops[DropReason.UNKNOWN_DESTINATION] += 1
                continue
            payload = datagram.payload
            size = len(payload)
            if (
                size >= MIN_WHOLE_DATA
                and payload[0] in data_opcodes
                and datagram.dscp not in trimmed_dscps
            ):
                # Untrimmed data, nearly every datagram: its fields straight to the receiver.
                opcode = payload[0]
                try:
                    fields = decode_whole_data_fields(
                        payload, size, opcode, datagram.ip, datagram.src_port, ROCEV2_UDP_PORT
                    )
                except DecodeError as error:
                    drops[error.reason] += 1
                    continue
                connection = connections.get(fields[0])
                if connection is None:
                    drops[DropReason.UNKNOWN_QP] += 1
                    continue
                reason = connection.receive_data(opcode, fields, datagram, plane, now)
                if reason is not None:
                    drops[reason] += 1
                continue
            try:
                packet = decode(
                    payload,
                    datagram.ip,
                    datagram.src_port,
                    datagram.dst_port,
                    trimmed=datagram.dscp in trimmed_dscps,
                )
            except DecodeError as error:
                drops[error.reason] += 1
                continue
            connection = connections.get(packet.dest_qp)
            if connection is None:
                if packet.dest_qp == CONNECTIONLESS_QP and type(packet) is EndpointMessage:
                    refused = self._on_connectionless(packet, datagram, plane, now)
                    if refused is not None:
                        drops[refused] += 1
                    continue
                drops[DropReason.UNKNOWN_QP] += 1
                continue
            reason = connection.receive(packet, datagram, plane, now)
            if reason is not None:
                drops[reason] += 1

    def _drop(self, reason: DropReason) -> None:
        self.stats.drops[reason] += 1

    def datagrams_to_send(
        self, now: float, slots: SendSlots | None = None, limit: int | None = None
    ) -> list[OutgoingDatagram]:
        """Every datagram that may leave at ``now``, in order; with ``slots``, data packets on
        paths the slots take are written into them (and flushed through their sink when full;
        the caller flushes the rest) and the list holds the others (see
        ``agent.core.send_slots``).

        ``limit``: at most this many data packets in all; control packets (SACKs, probes,
        answers) always go. A runtime sends in bounded bursts so that it reads the answers in
        between: a burst as large as the window lets the answers wait in the socket, and every
        packet of it is stamped with the burst's start time. ``data_sent_last_call`` says how many
        went (all of the limit: more may be ready at once); which connection goes first turns
        with each call, so that one busy connection cannot hold the others back."""
        out: list[OutgoingDatagram] = []
        if self._connectionless_out:
            out, self._connectionless_out = self._connectionless_out, []
        written = slots.written if slots is not None else 0
        data_sent = 0
        if limit is None:
            for connection in self._connections.values():
                out.extend(connection.datagrams_to_send(now, slots))
                data_sent += connection.data_sent_last_call
        else:
            connections = list(self._connections.values())
            count = len(connections)
            start = self._send_rotation % count if count else 0
            self._send_rotation = start + 1
            remaining = limit
            for index in range(count):
                connection = connections[(start + index) % count]
                out.extend(connection.datagrams_to_send(now, slots, remaining))
                data_sent += connection.data_sent_last_call
                remaining -= connection.data_sent_last_call
        self.data_sent_last_call = data_sent
        if slots is not None:
            written = slots.written - written
        self.stats.datagrams_sent += len(out) + written
        return out

    def handle_timer(self, now: float) -> None:
        """Run every timer due at ``now``."""
        for connection in self._connections.values():
            connection.handle_timer(now)

    def next_timer(self) -> float | None:
        """When ``handle_timer`` next has work (may be in the past: call it at once), or None."""
        earliest: float | None = None
        for connection in self._connections.values():
            deadline = connection.next_timer()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest
