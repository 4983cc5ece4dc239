"""One RC queue pair: a requester, a responder and DCQCN's two points on one fixed path.

A RoCE QP talks to one peer QP over one path: its packets all leave from one local address
(its plane's, the first unless the spec names another) to the peer's address on that plane,
from one UDP source port drawn when the QP is created, so the fabric's ECMP hash puts every
packet of the QP on the same path, as a NIC's does. Data is sent ECT(0) in the RoCE data
class; ACKs and NAKs, and CNPs, in classes of their own (``RoceConfig.dscp``), not ECN-capable.

States, as verbs names them: ``RTS`` once connected (the testbed opens a QP straight into it,
the side channel having exchanged what RTR needs) and ``ERROR`` once its requester gave up or
the responder refused its writes; a QP in ``ERROR`` sends nothing and drops what arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from agent.core.cc.dcqcn_law import ReactionPoint
from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from agent.core.drops import DropReason
from agent.core.events import Event
from agent.core.memory import MemoryTable
from agent.core.stats import ConnectionStats, EvReport, RetransmitCause
from agent.roce.codec import encode
from agent.roce.config import RoceConfig
from agent.roce.packets import SELECTIVE_NAK, RoceAck, RoceCnp, RoceData, RocePacket
from agent.roce.requester import Requester
from agent.roce.responder import Responder
from agent.roce.selective_responder import SelectiveResponder
from wire.constants import ECN_CE, ECN_ECT0, ECN_NOT_ECT, EvState
from wire.entropy import ev_from_headers

_U24: Final = 0xFFFFFF


@dataclass(frozen=True, slots=True)
class RoceQpSpec:
    """What both sides agreed for a QP: numbers, the peer's address, first PSNs, settings."""

    local_qp: int
    remote_qp: int
    remote_address: bytes
    #: First PSN this QP sends, and the first it expects from the peer.
    send_psn: int
    receive_psn: int
    config: RoceConfig
    #: Protection domain: the QP's writes land only in regions registered in it (as verbs),
    #: the host API's PDs; 0 is the side channel's, whose regions are registered in 0.
    pd: int = 0
    #: The plane (the endpoint's local address, by index) the QP sends from, and on which
    #: ``remote_address`` is the peer's.
    plane: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.remote_qp <= _U24 or not 0 <= self.local_qp <= _U24:
            raise ValueError("QP numbers are 24-bit")
        if not 0 <= self.send_psn <= _U24 or not 0 <= self.receive_psn <= _U24:
            raise ValueError("PSNs are 24-bit")
        if len(self.remote_address) not in (4, 16):
            raise ValueError("the peer's address is a packed IPv4 or IPv6 address")
        if self.plane < 0:
            raise ValueError(f"plane must be >= 0, got {self.plane}")


@dataclass(frozen=True, slots=True)
class RoceStats:
    """What ``ConnectionStats`` has no field for: the RC state machine and DCQCN."""

    qp: int
    state: str
    error: str | None
    src_port: int
    local_ack_timeout: float | None
    retry_cnt: int
    #: Recovery: selective repeat (else go-back-N), and whether the timer is adaptive.
    selective_repeat: bool
    adaptive_retransmission: bool
    #: The timer in force now (the local ACK timeout, or the adaptive RTO with its backoff).
    rto: float | None
    #: Retries since the last progress (the QP fails beyond ``retry_cnt``).
    retries: int
    go_backs: int
    naks_received: int
    naks_sent: int
    acks_received: int
    acks_sent: int
    duplicate_acks: int
    out_of_sequence: int
    #: Packets kept ahead of the expected PSN (selective repeat).
    out_of_order_kept: int
    cnps_received: int
    cnps_sent: int
    #: DCQCN's R_C and R_T (bytes/s), alpha and the increase stage it is in.
    rate: float
    target_rate: float
    alpha: float
    stage: str


class RoceQp:
    """An RC QP in RTS from construction on (see the module doc)."""

    def __init__(
        self,
        spec: RoceQpSpec,
        local_address: bytes,
        src_port: int,
        memory: MemoryTable,
        emit: Callable[[Event], None],
    ) -> None:
        if len(local_address) != len(spec.remote_address):
            raise ValueError("the peer's address is not of this QP's IP version")
        config = spec.config
        self.qp = spec.local_qp
        self.remote_qp = spec.remote_qp
        self.config = config
        self.local_address = local_address
        self.remote_address = spec.remote_address
        self.src_port = src_port
        self.plane = spec.plane
        self._path = IpContext(src=local_address, dst=spec.remote_address)
        self.rate = ReactionPoint(config.dcqcn.law())
        self.requester = Requester(
            spec.local_qp, spec.remote_qp, spec.send_psn, config, self.rate, emit
        )
        responder = SelectiveResponder if config.selective_repeat else Responder
        self.responder: Responder = responder(
            spec.local_qp, spec.remote_qp, spec.receive_psn, config, memory, emit, spec.pd
        )
        self.cnps_received = 0
        #: Data packets the latest ``datagrams_to_send`` call sent.
        self.data_sent_last_call = 0

    @property
    def state(self) -> str:
        """``RTS`` or ``ERROR``."""
        return "ERROR" if self.requester.error is not None else "RTS"

    @property
    def closed(self) -> bool:
        """Whether the QP is in the error state."""
        return self.requester.error is not None

    # --- input ----------------------------------------------------------------------------

    def receive(
        self, packet: RocePacket, datagram: IncomingDatagram, now: float
    ) -> DropReason | None:
        """A decoded packet for this QP; returns why it was dropped, if it was."""
        if datagram.ip.src != self.remote_address:
            return DropReason.WRONG_SOURCE
        if self.requester.error is not None:
            return DropReason.CONNECTION_CLOSED
        if type(packet) is RoceData:
            return self.responder.on_data(packet, datagram.ecn == ECN_CE, now)
        if type(packet) is RoceAck:
            if packet.syndrome == SELECTIVE_NAK:
                return self.requester.on_selective_nak(packet.psn, packet.msn, now)
            return self.requester.on_ack(packet.syndrome, packet.psn, now)
        self.cnps_received += 1
        self.rate.on_cnp(now)
        return None

    # --- output ---------------------------------------------------------------------------

    def datagrams_to_send(self, now: float, limit: int | None = None) -> list[OutgoingDatagram]:
        """The responder's answers, then data as the pacer allows (at most ``limit``)."""
        out: list[OutgoingDatagram] = []
        self.data_sent_last_call = 0
        if self.requester.error is not None:
            return out
        config = self.config
        responder = self.responder
        if responder.has_output:
            for answer in responder.packets_to_send():
                dscp = config.dscp.roce_cnp if type(answer) is RoceCnp else config.dscp.roce_ack
                out.append(self._datagram(answer, dscp, ECN_NOT_ECT))
        budget = 1 << 30 if limit is None else limit
        if budget > 0 and self.requester.wants_to_send:
            packets = self.requester.next_packets(now, budget)
            self.data_sent_last_call = len(packets)
            data_dscp = config.dscp.roce_data
            for packet in packets:
                out.append(self._datagram(packet, data_dscp, ECN_ECT0))
        return out

    def _datagram(self, packet: RocePacket, dscp: int, ecn: int) -> OutgoingDatagram:
        path = self._path
        return OutgoingDatagram(encode(packet, path, self.src_port), path, self.plane,
                                self.src_port, 0, dscp, ecn)  # fmt: skip

    # --- time -----------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """When the QP next has something to do on its own: the local ACK timer, or the
        pacer letting a held-back packet go."""
        requester = self.requester
        if requester.error is not None:
            return None
        deadline = requester.next_timer()
        wake = requester.pacing_wake()
        if wake is not None and (deadline is None or wake < deadline):
            return wake
        return deadline

    def handle_timer(self, now: float) -> None:
        """Run the local ACK timer."""
        self.requester.handle_timer(now)

    # --- statistics -----------------------------------------------------------------------

    def stats(self) -> ConnectionStats:
        """The QP's statistics in the form every connection reports (``agent.core.stats``):
        retransmits and losses by what caused them (a NAK or a timeout; no SACK gaps in RC),
        one "EV" (the fixed source port) and the timer in force as the RTO (0 when the QP has
        none), with the RTT it was measured from when it is adaptive."""
        req = self.requester.counters
        rsp = self.responder.counters
        timer = self.requester.timer
        timeout = timer.rto
        ev = EvReport(
            plane=self.plane,
            ev=ev_from_headers(self.src_port),
            state=EvState.ASSUMED_BAD if self.closed else EvState.GOOD,
            home=True,
            uses=req.data_packets_sent,
            losses=req.timeouts,
        )
        return ConnectionStats(
            qp=self.qp,
            messages_posted=req.messages_posted,
            messages_acked=req.messages_acked,
            messages_failed=req.messages_failed,
            messages_received=rsp.messages_received,
            data_packets_sent=req.data_packets_sent,
            data_bytes_sent=req.data_bytes_sent,
            packets_acked=req.packets_acked,
            bytes_acked=req.bytes_acked,
            data_packets_received=rsp.data_packets_received,
            data_bytes_received=rsp.data_bytes_received,
            duplicates_received=rsp.duplicates_received,
            retransmits=dict(req.retransmits),
            losses={
                RetransmitCause.NACK: req.naks_received,
                RetransmitCause.SACK_GAP: 0,
                RetransmitCause.TIMEOUT: req.timeouts,
            },
            spurious_losses=0,
            evs_reinstated=0,
            timeouts=req.timeouts,
            spurious_timeouts=0,
            tail_probes=0,
            completion_probes=0,
            trims_seen=0,
            trims_lasthop_seen=0,
            trims_received=0,
            nacks_other=0,
            ecn_echoes=self.cnps_received,
            ecn_marks_received=rsp.ecn_marks_received,
            writes_rejected=rsp.writes_rejected,
            ev_probes_sent=0,
            ev_probes_answered=0,
            srtt=timer.srtt,
            min_rtt=None,
            rttvar=timer.rttvar,
            rto=timeout if timeout is not None else 0.0,
            reorder_window=0.0,
            reorder_multiplier=1,
            cwnd=self.config.max_outstanding * self.config.pmtu,
            bytes_in_flight=self.requester.unacked_bytes,
            evs=(ev,),
        )

    def roce_stats(self) -> RoceStats:
        """The RC and DCQCN state (see ``RoceStats``)."""
        req = self.requester.counters
        rsp = self.responder.counters
        return RoceStats(
            qp=self.qp,
            state=self.state,
            error=self.requester.error,
            src_port=self.src_port,
            local_ack_timeout=self.config.local_ack_timeout,
            retry_cnt=self.config.retry_cnt,
            selective_repeat=self.config.selective_repeat,
            adaptive_retransmission=self.requester.timer.adaptive,
            rto=self.requester.timer.rto,
            retries=self.requester.retries,
            go_backs=req.go_backs,
            naks_received=req.naks_received,
            naks_sent=rsp.naks_sent,
            acks_received=req.acks_received,
            acks_sent=rsp.acks_sent,
            duplicate_acks=req.duplicate_acks,
            out_of_sequence=rsp.out_of_sequence,
            out_of_order_kept=rsp.out_of_order_kept,
            cnps_received=self.cnps_received,
            cnps_sent=rsp.cnps_sent,
            rate=self.rate.rate,
            target_rate=self.rate.target,
            alpha=self.rate.alpha,
            stage=self.rate.stage,
        )
