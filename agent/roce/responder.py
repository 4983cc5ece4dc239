"""The responder half of an RC QP: places writes in order, answers with ACKs, NAKs and CNPs.

What a RoCE NIC does (IBTA Vol. 1, 9.7.5; Annex A17 for the CNP):

* It accepts only the packet with the expected PSN (ePSN). A packet *ahead* of it (something
  before it was lost) is dropped, and the first one of a gap is answered by one NAK (PSN
  sequence error, carrying the ePSN); further packets of the same gap are dropped silently,
  until the ePSN arrives. A packet *behind* it (a duplicate: its ACK was lost, or the requester
  went back further than needed) is not placed again but acknowledged again.
* Writes arrive in order, so only the first packet of a write carries its RETH; the rest go to
  the running address. The whole range is checked against the R_Key once, on that first
  packet: a bad key or range is answered by a NAK (remote access error) and nothing is
  written. A broken opcode sequence or a length that disagrees with the RETH is an invalid
  request, answered likewise.
* ACKs are coalesced: one goes out when a packet with AckReq arrived (the requester sets it on
  every write's last packet), when ``ack_every`` packets arrived since the last ACK, or when a
  duplicate arrived; and however many were due since the caller last asked for output, one ACK
  (for the newest PSN) answers them all. A NAK already answers everything before its PSN, so
  no ACK goes with it; a NAK whose gap was filled before it could leave becomes an ACK.
* As DCQCN's notification point it answers CE-marked data with a CNP, at most one per N
  (``agent.core.cc.dcqcn_law.CnpPacer``), whatever the PSN of the marked packet.

This is go-back-N's responder; ``agent.roce.selective_responder`` extends it for selective
repeat (out-of-order packets kept and placed, selective NAKs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from agent.core.cc.dcqcn_law import CnpPacer
from agent.core.drops import DropReason
from agent.core.events import Event, MessageReceived, WriteRejected
from agent.core.memory import MemoryTable
from agent.core.psn import PSN_MASK, psn_diff
from agent.roce.config import RoceConfig
from agent.roce.packets import RoceAck, RoceCnp, RoceData
from wire.constants import AETH_CREDIT_INVALID, AethSyndrome, RoceOpcode

_U24: Final = 0xFFFFFF
_ACK: Final = int(AethSyndrome.ACK) | AETH_CREDIT_INVALID
_NAK_SEQ: Final = int(AethSyndrome.NAK_PSN_SEQUENCE_ERROR)
_NAK_INVALID: Final = int(AethSyndrome.NAK_INVALID_REQUEST)
_NAK_ACCESS: Final = int(AethSyndrome.NAK_REMOTE_ACCESS_ERROR)
_FIRST: Final = int(RoceOpcode.RC_RDMA_WRITE_FIRST)
_MIDDLE: Final = int(RoceOpcode.RC_RDMA_WRITE_MIDDLE)
_STARTS: Final = frozenset(
    {_FIRST, int(RoceOpcode.RC_RDMA_WRITE_ONLY), int(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM)}
)
_ENDS: Final = frozenset(
    {
        int(RoceOpcode.RC_RDMA_WRITE_LAST),
        int(RoceOpcode.RC_RDMA_WRITE_LAST_IMM),
        int(RoceOpcode.RC_RDMA_WRITE_ONLY),
        int(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM),
    }
)


class ResponderCounters:
    """What the responder did, for ``agent.roce.qp``'s statistics."""

    __slots__ = (
        "acks_sent",
        "cnps_sent",
        "data_bytes_received",
        "data_packets_received",
        "duplicates_received",
        "ecn_marks_received",
        "messages_received",
        "naks_sent",
        "out_of_order_kept",
        "out_of_sequence",
        "writes_rejected",
    )

    def __init__(self) -> None:
        self.data_packets_received = 0
        self.data_bytes_received = 0
        self.duplicates_received = 0
        #: Packets ahead of the ePSN, dropped (the first of each gap NAKed); under selective
        #: repeat only those beyond the window.
        self.out_of_sequence = 0
        #: Packets ahead of the ePSN kept (selective repeat only).
        self.out_of_order_kept = 0
        self.messages_received = 0
        self.writes_rejected = 0
        self.ecn_marks_received = 0
        self.acks_sent = 0
        self.naks_sent = 0
        self.cnps_sent = 0


class Responder:
    """The receive side of one RC QP; its answers go to the requester's QP ``dest_qp``."""

    def __init__(
        self,
        qp: int,
        dest_qp: int,
        expected_psn: int,
        config: RoceConfig,
        memory: MemoryTable,
        emit: Callable[[Event], None],
        pd: int = 0,
    ) -> None:
        self.qp = qp
        self._pd = pd
        self._dest_qp = dest_qp
        self.expected_psn = expected_psn & PSN_MASK
        self._ack_every = config.ack_every
        self._memory = memory
        self._emit = emit
        self.counters = ResponderCounters()
        self._cnp = CnpPacer(config.dcqcn.cnp_interval)
        #: Messages completed (AETH's MSN).
        self._msn = 0
        # The write in progress: its R_Key, first address, next address, length, bytes so far.
        self._in_message = False
        self._rkey = 0
        self._va = 0
        self._next_va = 0
        self._length = 0
        self._received = 0
        self._unacked = 0
        self._ack_due = False
        self._cnp_due = False
        #: The ePSN a sequence-error NAK went out (or waits to go out) for: one per gap.
        self._nak_psn: int | None = None
        self._nak_pending = False
        self._error_naks: list[RoceAck] = []
        #: Selective NAKs waiting to go out (selective repeat only).
        self._gap_naks: list[RoceAck] = []

    def on_data(self, packet: RoceData, congested: bool, now: float) -> DropReason | None:
        """A data packet for this QP arrived (``congested``: CE-marked); returns why it was
        refused as malformed, if it was. Packets out of sequence are dropped by design and
        counted in ``counters``, not returned."""
        counters = self.counters
        if congested:
            self._on_marked(now)
        distance = psn_diff(packet.psn, self.expected_psn)
        if distance < 0:
            counters.duplicates_received += 1
            self._ack_due = True
            return None
        if distance > 0:
            counters.out_of_sequence += 1
            if self._nak_psn != self.expected_psn:
                self._nak_psn = self.expected_psn
                self._nak_pending = True
            return None
        return self._accept(packet)

    def _on_marked(self, now: float) -> None:
        """A CE-marked data packet arrived: a CNP falls due, at most one per N."""
        self.counters.ecn_marks_received += 1
        if self._cnp.on_marked(now):
            self._cnp_due = True

    def _accept(self, packet: RoceData) -> DropReason | None:
        """The expected packet: check, place, advance the ePSN."""
        opcode = packet.opcode
        payload = packet.payload
        size = len(payload)
        if opcode in _STARTS:
            if self._in_message:
                return self._invalid(packet, "a new write began before the last one ended")
            refusal = self._memory.check(packet.rkey, packet.va, packet.dma_length, self._pd)
            if refusal is not None:
                return self._refuse_access(refusal)
            self._in_message = True
            self._rkey = packet.rkey
            self._va = self._next_va = packet.va
            self._length = packet.dma_length
            self._received = 0
        elif not self._in_message:
            return self._invalid(packet, "a write continued that never began")
        last = opcode in _ENDS
        if self._received + size > self._length:
            return self._invalid(packet, "more bytes than the RETH's DMA length")
        if last and self._received + size != self._length:
            return self._invalid(packet, "fewer bytes than the RETH's DMA length")
        if not last and (size == 0 or size % 4):
            return self._invalid(packet, "a FIRST or MIDDLE packet must carry whole PMTUs")
        if size:
            refusal = self._memory.write(self._rkey, self._next_va, payload, self._pd)
            if refusal is not None:  # the region was withdrawn since the write began
                self._in_message = False
                return self._refuse_access(refusal)
        counters = self.counters
        counters.data_packets_received += 1
        counters.data_bytes_received += size
        self._next_va += size
        self._received += size
        self.expected_psn = (self.expected_psn + 1) & PSN_MASK
        self._unacked += 1
        if last:
            self._in_message = False
            self._complete(self._rkey, self._va, self._length, packet.immediate)
        if packet.ack_req or self._unacked >= self._ack_every:
            self._ack_due = True
        return None

    def _invalid(self, packet: RoceData, why: str) -> DropReason:
        self.counters.writes_rejected += 1
        self._in_message = False
        self._emit(WriteRejected(self.qp, self._msn & 0xFFFF, f"invalid request: {why}"))
        self._error_naks.append(self._aeth(_NAK_INVALID))
        return DropReason.BAD_FIELD

    def _refuse_access(self, refusal: DropReason) -> DropReason:
        """A write the memory table refused: reported, answered by a remote access NAK."""
        self.counters.writes_rejected += 1
        self._emit(WriteRejected(self.qp, self._msn & 0xFFFF, refusal.value))
        self._error_naks.append(self._aeth(_NAK_ACCESS))
        return refusal

    def _complete(self, rkey: int, va: int, length: int, immediate: int | None) -> None:
        """A write arrived whole: its completion, in order, counted by the MSN."""
        self.counters.messages_received += 1
        self._emit(MessageReceived(self.qp, self._msn & 0xFFFF, rkey, va, length, immediate))
        self._msn = (self._msn + 1) & _U24

    def _aeth(self, syndrome: int) -> RoceAck:
        psn = self.expected_psn if syndrome != _ACK else (self.expected_psn - 1) & PSN_MASK
        return RoceAck(self._dest_qp, psn, syndrome, self._msn)

    def packets_to_send(self) -> list[RoceAck | RoceCnp]:
        """The answers due since the last call: a CNP, error NAKs, selective NAKs, then one
        sequence-error NAK or one ACK."""
        out: list[RoceAck | RoceCnp] = []
        counters = self.counters
        if self._cnp_due:
            self._cnp_due = False
            counters.cnps_sent += 1
            out.append(RoceCnp(self._dest_qp))
        if self._error_naks:
            counters.naks_sent += len(self._error_naks)
            out.extend(self._error_naks)
            self._error_naks.clear()
        if self._gap_naks:
            counters.naks_sent += len(self._gap_naks)
            out.extend(self._gap_naks)
            self._gap_naks.clear()
        if self._nak_pending:
            self._nak_pending = False
            if self._nak_psn == self.expected_psn:
                counters.naks_sent += 1
                self._ack_due = False
                self._unacked = 0
                out.append(self._aeth(_NAK_SEQ))
                return out
            self._ack_due = True  # the gap closed before the NAK could leave
        if self._ack_due:
            self._ack_due = False
            self._unacked = 0
            counters.acks_sent += 1
            out.append(self._aeth(_ACK))
        return out

    @property
    def has_output(self) -> bool:
        """Whether ``packets_to_send`` has something."""
        return (
            self._cnp_due
            or self._ack_due
            or self._nak_pending
            or bool(self._error_naks)
            or bool(self._gap_naks)
        )
