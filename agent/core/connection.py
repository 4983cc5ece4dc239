"""One MRC connection (a QP pair): sender and receiver halves, EV set, congestion control.

The connection is where packets meet the network: it decodes nothing and owns no socket, but it
decides which plane and EV each packet leaves on and with which DSCP/ECN, and it answers the
peer's control traffic:

* data leaves on the EV the rotation picks (DSCP TRIMMABLE, TRIMMABLE_RETX for copies, ECT(0));
* SACKs, NACKs, ACKs and endpoint responses go back on the plane and EV the packet they answer
  came on: that EV has just proven to work, and with symmetric ECMP hashing so does its way
  back (DSCP CONTROL, Not-ECT);
* EV probes (endpoint request EV_PROBE) go out on the probed EV; port-state updates
  (PORT_STATUS, bitmap of this side's planes that are up) are repeated every probe interval
  until the peer answers.

It fails (``ConnectionFailed``) when it has messages outstanding and hears nothing at all from
its peer for ``peer_timeout`` (or the connection's own, ``set_peer_timeout``), or
``peer_timeout_rtos`` measured RTOs where that is longer.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent.core.cc import create_congestion_control
from agent.core.codec import WholeDataFields, data_packet_fields, encode
from agent.core.config import MrcConfig
from agent.core.data_encoder import MAX_DATA_OVERHEAD, DataPacketEncoder
from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.ev import EvSet
from agent.core.events import ConnectionFailed, Event, PeerPlaneStateChanged
from agent.core.memory import MemoryTable
from agent.core.messages import SentPacket
from agent.core.packets import (
    DEFAULT_PKEY,
    AckPacket,
    DataPacket,
    EndpointMessage,
    NackPacket,
    Packet,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from agent.core.receiver import Receiver
from agent.core.rtt import RttEstimator
from agent.core.send_slots import SendSlots
from agent.core.sender import Sender
from agent.core.stats import ConnectionCounters, ConnectionStats
from wire.constants import (
    ECN_CE,
    ECN_ECT0,
    ECN_NOT_ECT,
    IMM_OPCODES,
    MAX_EV_PROBE_ANSWERS,
    ROCEV2_UDP_PORT,
    EpType,
)
from wire.entropy import ev_flow_label, ev_from_headers, ev_source_port

_IMM_OPCODE_SET: Final = frozenset(int(op) for op in IMM_OPCODES)
#: Most data packets cut per ``datagrams_to_send`` call when the caller sets no limit: a whole
#: PSN window, so the congestion window (and EVs) are what limits a burst.
_BURST: Final = 1 << 16
#: Enum members read per EV probe sent or answered, as module constants (an enum attribute
#: access is slow).
_EV_PROBE: Final = int(EpType.EV_PROBE)
_PORT_STATUS: Final = int(EpType.PORT_STATUS)


class ConnectionClosed(Exception):
    """The connection has failed or been closed; it takes no more work."""


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    """What both sides agreed on at setup (the side channel's job, not the core's).

    ``remote_addresses[p]`` is the peer's address on plane p, aligned with the endpoint's local
    addresses. ``send_psn`` is this side's first PSN, ``receive_psn`` the peer's. ``evs``, when
    given, is the EV set as (plane, EV) pairs (an EV profile's; see ``agent.core.ev``), with
    ``ev_min_active`` its floor; otherwise the set is drawn at random. ``ev_events`` asks for an
    ``EvStateChanged`` event at every change of a home EV's state (the host API's EV events).
    Writes from the peer land only in regions of protection domain ``pd``.
    """

    local_qp: int
    remote_qp: int
    remote_addresses: tuple[bytes, ...]
    send_psn: int = 0
    receive_psn: int = 0
    evs: tuple[tuple[int, int], ...] | None = None
    ev_min_active: int = 0
    ev_events: bool = False
    #: Given EVs that may take a random stand-in once none can carry data (``agent.core.ev``).
    ev_standin_when_starved: bool = False
    pd: int = 0


class Connection:
    """One connection of an endpoint. Use it through ``Endpoint``."""

    def __init__(
        self,
        spec: ConnectionSpec,
        local_addresses: Sequence[bytes],
        local_planes_up: Sequence[bool],
        config: MrcConfig,
        memory: MemoryTable,
        rng: random.Random,
        events: deque[Event],
    ) -> None:
        planes = len(local_addresses)
        self.qp = spec.local_qp
        self._remote_qp = spec.remote_qp
        self._config = config
        #: Silence allowed with work outstanding (None: any); ``set_peer_timeout``.
        self._peer_timeout: float | None = config.peer_timeout
        self._events = events
        self._remote = tuple(spec.remote_addresses)
        self._paths = [
            IpContext(src=local, dst=remote)
            for local, remote in zip(local_addresses, spec.remote_addresses, strict=True)
        ]
        self._data_encoders = [DataPacketEncoder(path, spec.remote_qp) for path in self._paths]
        self._local_up = list(local_planes_up)
        self._remote_up = [True] * planes
        self.counters = ConnectionCounters()
        self.rtt = RttEstimator(config)
        self.ev_set = EvSet(
            config,
            planes,
            ipv6=len(local_addresses[0]) == 16,
            rng=rng,
            homes=spec.evs,
            min_active=spec.ev_min_active,
            events=events if spec.ev_events else None,
            qp=spec.local_qp,
            standin_when_starved=spec.ev_standin_when_starved,
        )
        for plane in range(planes):
            self.ev_set.set_plane_usable(plane, self._local_up[plane])
        self.sender = Sender(
            config,
            spec.local_qp,
            spec.remote_qp,
            spec.send_psn,
            self.ev_set,
            create_congestion_control(config),
            self.rtt,
            self.counters,
            events,
        )
        self.receiver = Receiver(
            config,
            spec.local_qp,
            spec.remote_qp,
            spec.receive_psn,
            memory,
            self.counters,
            events,
            spec.pd,
        )
        self._replies: list[tuple[Packet, int, int]] = []  # packet, plane, EV
        #: EV probes of the peer not yet answered, per plane: (seq, value, EV it came on).
        #: They are answered together, in one response per plane and turn (see
        #: ``EndpointMessage.more_answers``), when this turn's output is collected.
        self._probe_answers: dict[int, list[tuple[int, int, int]]] = {}
        self._sack_plane = 0  # plane of the latest data packet: its coalesced SACK's way back
        self._scratch: list[Packet] = []
        self._dscp = config.dscp
        self.closed = False
        self._last_heard = 0.0
        self._watch_from_next_call = True
        self._pacing_wake: float | None = None
        #: Data packets the latest ``datagrams_to_send`` call sent (the endpoint spends a
        #: caller's burst limit across its connections with it).
        self.data_sent_last_call = 0
        self._port_status_seq = 0
        self._port_status_unanswered = not all(self._local_up)
        # Opened while a local port is down: the peer must hear it before it sprays there.
        self._port_status_due: float | None = 0.0 if self._port_status_unanswered else None

    # --- application side -----------------------------------------------------------------

    def post_write(
        self, data: bytes | memoryview, remote_va: int, rkey: int, immediate: int | None
    ) -> int:
        """Queue an RDMA write; returns its MSN (see ``Sender.post``)."""
        if self.closed:
            raise ConnectionClosed(f"connection {self.qp:#x} is closed")
        if not self.sender.has_unconfirmed:
            self._watch_from_next_call = True
        return self.sender.post(data, remote_va, rkey, immediate)

    def set_local_plane_up(self, plane: int, up: bool) -> None:
        """This host's port on ``plane`` went up or down: stop/start using it, tell the peer."""
        if self._local_up[plane] == up:
            return
        self._local_up[plane] = up
        self.ev_set.set_plane_usable(plane, up and self._remote_up[plane])
        self._port_status_seq = (self._port_status_seq + 1) & 0xFFFF
        self._port_status_unanswered = True
        self._port_status_due = 0.0

    def close(self, reason: str) -> None:
        """Stop: unconfirmed messages fail with ``reason``."""
        if not self.closed:
            self.closed = True
            self.sender.fail_all(reason)

    # --- network side ---------------------------------------------------------------------

    def receive_data(
        self,
        opcode: int,
        fields: WholeDataFields,
        datagram: IncomingDatagram,
        plane: int,
        now: float,
    ) -> DropReason | None:
        """Process one untrimmed data packet addressed to this connection, as
        ``decode_whole_data_fields`` gave it (the per-packet path: no ``DataPacket``)."""
        if self.closed:
            return DropReason.CONNECTION_CLOSED
        if datagram.ip.src != self._remote[plane]:
            return DropReason.WRONG_SOURCE
        self._last_heard = now
        (_qp, psn, msn, _rqmsn, va, rkey, dma_length, payload, immediate, timestamp, _ts_flags,
         _pkey) = fields  # fmt: skip
        ev = ev_from_headers(datagram.src_port, datagram.flow_label)
        scratch = self._scratch
        result = self.receiver.on_data_fields(
            opcode, psn, msn, va, rkey, dma_length, payload, immediate, timestamp, ev,
            datagram.ecn == ECN_CE, scratch,
        )  # fmt: skip
        self._sack_plane = plane
        if scratch:
            self._queue_replies(plane, ev)
        return result

    def receive(
        self, packet: Packet, datagram: IncomingDatagram, plane: int, now: float
    ) -> DropReason | None:
        """Process one decoded packet addressed to this connection."""
        if isinstance(packet, DataPacket):  # the endpoint sends these to receive_data
            return self.receive_data(
                packet.opcode, data_packet_fields(packet), datagram, plane, now
            )
        if self.closed:
            return DropReason.CONNECTION_CLOSED
        if datagram.ip.src != self._remote[plane]:
            return DropReason.WRONG_SOURCE
        self._last_heard = now
        if isinstance(packet, SackPacket):
            return self.sender.on_sack(packet, now)
        if isinstance(packet, NackPacket):
            return self.sender.on_nack(packet, now)
        if isinstance(packet, AckPacket):
            return self.sender.on_ack(packet, now)
        if isinstance(packet, TrimmedDataHeader):
            last_hop = datagram.dscp == self._dscp.trimmed_lasthop
            result = self.receiver.on_trimmed(
                packet, datagram.ev, last_hop, datagram.ecn == ECN_CE, self._scratch
            )
            self._queue_replies(plane, datagram.ev)
            return result
        if isinstance(packet, ReliabilityProbe):
            result = self.receiver.on_probe(packet, datagram.ev, self._scratch)
            self._queue_replies(plane, datagram.ev)
            return result
        return self._on_endpoint_message(packet, datagram.ev, plane)

    def _queue_replies(self, plane: int, ev: int) -> None:
        for reply in self._scratch:
            self._replies.append((reply, plane, ev))
        self._scratch.clear()

    def _on_endpoint_message(
        self, message: EndpointMessage, ev: int, plane: int
    ) -> DropReason | None:
        if message.response:
            if message.ep_type == _EV_PROBE:
                ev_set = self.ev_set
                answered = int(ev_set.on_probe_answered(message.seq, message.value))
                for seq, value in message.more_answers:
                    answered += ev_set.on_probe_answered(seq, value)
                if not answered:
                    return DropReason.UNEXPECTED  # answers only probes we gave up on
                self.counters.ev_probes_answered += answered
                self.sender.on_path_answered(self._last_heard)
                return None
            if message.seq != self._port_status_seq:
                return DropReason.UNEXPECTED
            self._port_status_unanswered = False
            self._port_status_due = None
            return None
        if message.ep_type == _EV_PROBE:
            if message.more_answers:
                return DropReason.BAD_FIELD  # answers ride only on responses
            self._probe_answers.setdefault(plane, []).append((message.seq, message.value, ev))
            return None
        if message.ep_type == _PORT_STATUS:
            self._apply_peer_port_status(message.value)
        # Positional (dest_qp, psn, response, ep_type, seq, value): one per port-state update.
        response = EndpointMessage(
            self._remote_qp, 0, True, message.ep_type, message.seq, message.value
        )
        self._replies.append((response, plane, ev))
        return None

    def _apply_peer_port_status(self, bitmap: int) -> None:
        for plane in range(len(self._remote_up)):
            up = bool((bitmap >> plane) & 1)
            if up != self._remote_up[plane]:
                self._remote_up[plane] = up
                self.ev_set.set_plane_usable(plane, up and self._local_up[plane])
                self._events.append(PeerPlaneStateChanged(self.qp, plane, up))

    # --- output and timers ----------------------------------------------------------------

    def datagrams_to_send(
        self, now: float, slots: SendSlots | None = None, limit: int = _BURST
    ) -> list[OutgoingDatagram]:
        """Everything this connection may send at ``now``; with ``slots``, data packets on
        paths the slots take are written into them instead (see ``agent.core.send_slots``),
        in order, and the returned list holds the rest. At most ``limit`` data packets
        (control packets are never held back): ``data_sent_last_call`` says how many went."""
        self.data_sent_last_call = 0
        if self.closed:
            return []
        self._watch(now)
        out: list[OutgoingDatagram] = []
        control = self._dscp.control
        receiver = self.receiver
        if receiver.sack_pending:
            # The caller has handed over everything that arrived: answer it with one SACK.
            ev = receiver.pending_sack_ev
            receiver.flush_sack(self._scratch)
            self._queue_replies(self._sack_plane, ev)
        for packet, plane, ev in self._replies:
            out.append(self._datagram(packet, plane, ev, control, ECN_NOT_ECT))
        self._replies.clear()
        if self._probe_answers:
            self._answer_probes(out)
        self._run_probes(now, out)
        for packet, entry in self.sender.take_outbox():
            if type(packet) is DataPacket:
                dscp, ecn = self._dscp.trimmable_retx, ECN_ECT0
            else:
                dscp, ecn = control, ECN_NOT_ECT
            out.append(self._datagram(packet, entry.plane, entry.value, dscp, ecn))
        if limit > 0:
            self._send_data(now, out, slots, limit)
        return out

    def _send_data(
        self, now: float, out: list[OutgoingDatagram], slots: SendSlots | None, limit: int
    ) -> None:
        """Data packets, as many as window, pacing and EVs allow: the per-packet hot path,
        hence the locals and the direct encoding from the sender's records (into ``slots``
        where given, the slots take the path and a packet fits one)."""
        sender = self.sender
        cc = sender.cc
        paced = cc.paced
        self._pacing_wake = None
        trimmable = self._dscp.trimmable
        retx_dscp = self._dscp.trimmable_retx
        encoders = self._data_encoders
        paths = self._paths
        rqmsn = sender.rqmsn  # cannot change before the next SACK or ACK is processed
        append = out.append
        # Per plane: whether its data packets are written into ``slots`` (else they go out as
        # datagrams), decided once per call rather than per packet.
        in_slots = [False] * len(encoders)
        if slots is not None:
            filled = slots
            if self._config.payload_size + MAX_DATA_OVERHEAD <= slots.room:
                in_slots = [slots.takes(path) for path in paths]
            buffer = slots.buffer
            slot_size = slots.slot_size
            header_room = slots.header_room
            capacity = slots.capacity
            envelopes = slots.envelopes
            count = slots.count
            written = 0
        burst = self._transmissions(now, limit) if paced else sender.next_transmissions(now, limit)
        self.data_sent_last_call = len(burst)
        for rec in burst:
            entry = rec.entry
            assert entry is not None  # next_transmission always assigns one
            message = rec.message
            offset = rec.offset
            end = offset + rec.length
            opcode = rec.opcode
            retransmit = rec.transmissions > 1
            plane = entry.plane
            ev = entry.value
            src_port = ev_source_port(ev)
            if in_slots[plane]:
                if count == capacity:
                    filled.count = count
                    filled.flush()
                    count = filled.count
                length = encoders[plane].encode_into(
                    buffer, count * slot_size + header_room, opcode, rec.psn, message.msn,
                    rqmsn, message.remote_va + offset, message.rkey, message.length,
                    message.data[offset:end],
                    message.immediate if opcode in _IMM_OPCODE_SET else None, rec.ts16,
                    end >= message.length, retransmit, src_port,
                )  # fmt: skip
                envelopes[count].fill(
                    paths[plane], plane, src_port, ev_flow_label(ev),
                    retx_dscp if retransmit else trimmable, ECN_ECT0, ROCEV2_UDP_PORT, length,
                )  # fmt: skip
                count += 1
                written += 1
                continue
            payload = encoders[plane].encode(
                opcode, rec.psn, message.msn, rqmsn, message.remote_va + offset, message.rkey,
                message.length, message.data[offset:end],
                message.immediate if opcode in _IMM_OPCODE_SET else None, rec.ts16,
                end >= message.length, retransmit, src_port,
            )  # fmt: skip
            append(
                OutgoingDatagram(
                    payload, paths[plane], plane, src_port, ev_flow_label(ev),
                    retx_dscp if retransmit else trimmable, ECN_ECT0,
                )
            )  # fmt: skip
        if slots is not None:
            slots.count = count
            slots.written += written

    def _transmissions(self, now: float, limit: int) -> list[SentPacket]:
        """What a paced controller lets go now, up to ``limit``, one packet at a time (each
        send moves the controller's next send time)."""
        sender = self.sender
        cc = sender.cc
        out: list[SentPacket] = []
        while len(out) < limit:
            wake = cc.next_send_time(now)
            if wake > now:
                if sender.wants_to_send:
                    self._pacing_wake = wake
                return out
            rec = sender.next_transmission(now)
            if rec is None:
                return out
            out.append(rec)
        return out

    def _datagram(
        self, packet: Packet, plane: int, ev: int, dscp: int, ecn: int
    ) -> OutgoingDatagram:
        ip = self._paths[plane]
        src_port = ev_source_port(ev)
        # Positional: one per packet sent (payload, ip, plane, src_port, flow_label, dscp, ecn).
        return OutgoingDatagram(
            encode(packet, ip, src_port), ip, plane, src_port, ev_flow_label(ev), dscp, ecn
        )

    def _answer_probes(self, out: list[OutgoingDatagram]) -> None:
        """One EV_PROBE response per plane (per ``MAX_EV_PROBE_ANSWERS``) for the probes
        that arrived since the last turn, on the EV the first of them came on."""
        control = self._dscp.control
        for plane, answers in self._probe_answers.items():
            for start in range(0, len(answers), MAX_EV_PROBE_ANSWERS):
                group = answers[start : start + MAX_EV_PROBE_ANSWERS]
                seq, value, ev = group[0]
                # Positional (dest_qp, psn, response, ep_type, seq, value, flags, pkey, more).
                response = EndpointMessage(
                    self._remote_qp, 0, True, _EV_PROBE, seq, value, 0, DEFAULT_PKEY,
                    tuple((s, v) for s, v, _ev in group[1:]),
                )  # fmt: skip
                out.append(self._datagram(response, plane, ev, control, ECN_NOT_ECT))
        self._probe_answers.clear()

    def _run_probes(self, now: float, out: list[OutgoingDatagram]) -> None:
        due_at = self.ev_set.next_probe_time()
        if due_at is None or due_at > now:
            return
        # A probe is given as long as a data packet would be (the RTO, backoff included), never
        # less than an interval: a shorter timeout on a path slower than the probe interval
        # (a loaded software switch, a queue) failed every probe, and stand-ins were never
        # admitted while the paths worked.
        timeout = max(self._config.probe_interval, self.rtt.rto(self.sender.rto_backoff))
        interval = max(self._config.probe_interval, self.rtt.min_rtt or 0.0)
        control = self._dscp.control
        for entry, seq in self.ev_set.probes_due(now, timeout, interval):
            self.counters.ev_probes_sent += 1
            probe = EndpointMessage(self._remote_qp, 0, False, _EV_PROBE, seq, entry.value)
            out.append(self._datagram(probe, entry.plane, entry.value, control, ECN_NOT_ECT))

    def handle_timer(self, now: float) -> None:
        """Run the timers due at ``now`` (their output comes from ``datagrams_to_send``)."""
        if self.closed:
            return
        self._watch(now)
        deadline = self._peer_deadline()
        if deadline is not None and now >= deadline:
            reason = (
                f"peer unreachable: nothing heard for {deadline - self._last_heard:.3g} s "
                f"with messages outstanding"
            )
            self.close(reason)
            self._events.append(ConnectionFailed(self.qp, reason))
            return
        self.sender.on_timer(now)
        if self._port_status_due is not None and now >= self._port_status_due:
            self._send_port_status(now)

    def _send_port_status(self, now: float) -> None:
        self._port_status_due = now + self._config.probe_interval
        entry = self.ev_set.next_for_control()
        if entry is None:
            return
        bitmap = sum(1 << plane for plane, up in enumerate(self._local_up) if up)
        message = EndpointMessage(
            dest_qp=self._remote_qp,
            psn=0,
            response=False,
            ep_type=EpType.PORT_STATUS,
            seq=self._port_status_seq,
            value=bitmap,
        )
        self._replies.append((message, entry.plane, entry.value))

    def _watch(self, now: float) -> None:
        if self._watch_from_next_call:
            self._watch_from_next_call = False
            self._last_heard = max(self._last_heard, now)

    def set_peer_timeout(self, seconds: float | None) -> None:
        """Fail after ``seconds`` of silence with work outstanding instead of the configured
        ``peer_timeout`` (None: never fail for silence). The host API's QP ``timeout`` and
        ``retry`` come here: verbs' retry exhaustion is this connection's silence limit."""
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a peer timeout must be > 0 s or None, got {seconds}")
        self._peer_timeout = seconds

    def peer_silence_limit(self) -> float | None:
        """How long the peer may stay silent: the peer timeout, or ``peer_timeout_rtos`` times
        the measured RTO where that is longer (before any RTT sample, the peer timeout); None
        when silence never fails the connection."""
        timeout = self._peer_timeout
        if timeout is None:
            return None
        if self.rtt.srtt is None:
            return timeout
        return max(timeout, self._config.peer_timeout_rtos * self.rtt.rto())

    def _peer_deadline(self) -> float | None:
        if not self.sender.has_unconfirmed:
            return None
        limit = self.peer_silence_limit()
        return None if limit is None else self._last_heard + limit

    def next_timer(self) -> float | None:
        """When ``handle_timer`` (or pacing in ``datagrams_to_send``) next has work."""
        if self.closed:
            return None
        candidates = [
            t
            for t in (
                self.sender.next_timer(),
                self.ev_set.next_probe_time(),
                self._port_status_due,
                self._pacing_wake,
                None if self._watch_from_next_call else self._peer_deadline(),
            )
            if t is not None
        ]
        return min(candidates) if candidates else None

    # --- statistics -----------------------------------------------------------------------

    @property
    def remote_addresses(self) -> tuple[bytes, ...]:
        """The peer's address on each plane (a status names the peer by them)."""
        return self._remote

    def stats(self) -> ConnectionStats:
        """A snapshot of this connection's statistics."""
        c = self.counters
        return ConnectionStats(
            qp=self.qp,
            messages_posted=c.messages_posted,
            messages_acked=c.messages_acked,
            messages_failed=c.messages_failed,
            messages_received=c.messages_received,
            data_packets_sent=c.data_packets_sent,
            data_bytes_sent=c.data_bytes_sent,
            packets_acked=c.packets_acked,
            bytes_acked=c.bytes_acked,
            data_packets_received=c.data_packets_received,
            data_bytes_received=c.data_bytes_received,
            duplicates_received=c.duplicates_received,
            retransmits=dict(c.retransmits),
            losses=dict(c.losses),
            spurious_losses=c.spurious_losses,
            evs_reinstated=c.evs_reinstated,
            timeouts=c.timeouts,
            spurious_timeouts=c.spurious_timeouts,
            tail_probes=c.tail_probes,
            completion_probes=c.completion_probes,
            trims_seen=c.trims_seen,
            trims_lasthop_seen=c.trims_lasthop_seen,
            trims_received=c.trims_received,
            nacks_other=c.nacks_other,
            ecn_echoes=c.ecn_echoes,
            ecn_marks_received=c.ecn_marks_received,
            writes_rejected=c.writes_rejected,
            ev_probes_sent=c.ev_probes_sent,
            ev_probes_answered=c.ev_probes_answered,
            srtt=self.rtt.srtt,
            min_rtt=self.rtt.min_rtt,
            rttvar=self.rtt.rttvar,
            rto=self.rtt.rto(self.sender.rto_backoff),
            reorder_window=self.rtt.reorder_window(self.sender.reorder_multiplier),
            reorder_multiplier=self.sender.reorder_multiplier,
            cwnd=self.sender.cc.window,
            bytes_in_flight=self.sender.bytes_in_flight,
            evs=self.ev_set.report(),
        )
