"""The responder under selective repeat: packets ahead of the expected PSN are kept, not dropped.

A NIC that does selective repeat keeps no reorder buffer: it writes each packet into host
memory as it arrives and remembers which PSNs it has. So does this responder, within a window
of ``max_outstanding`` PSNs from the expected one (ePSN), the most a requester of the same
setting can have unacknowledged: anything further ahead is dropped as under go-back-N.

*Placing a packet that arrives early.* Only a write's first packet carries its RETH (address,
R_Key, length); a MIDDLE or LAST packet goes to the write's address plus its offset, which is
(its PSN - the FIRST's PSN) x the FIRST's payload size, since every packet but a write's last
carries exactly one PMTU. So the FIRST tells the responder the whole write: where it goes and
which PSNs it spans (length / PMTU, rounded up). A MIDDLE or LAST that arrives before its FIRST
cannot be placed yet: it is held (its payload kept) until the FIRST arrives, the one buffer
this needs, bounded by the window (at most ``max_outstanding`` x PMTU bytes). The checks of
go-back-N's responder hold, made when the write's range is known: the opcode each PSN of it
must have, the payload sizes, the R_Key and range checked once on the FIRST; a write whose
range overlaps another, or a packet the ePSN reaches with no write around it, is an invalid
request.

*Completion* stays in order, as RC requires: a write completes (``MessageReceived``) when the
ePSN passes its last PSN, i.e. when all its bytes have arrived and all writes before it have.

*Answers.* ACKs are go-back-N's: cumulative, for the PSN before the ePSN, coalesced the same way
(every ``ack_every`` PSNs the ePSN passes, a completed write, a duplicate). A packet that arrives
beyond the highest PSN received so far reveals a gap, the PSNs in between, answered at once by
one selective NAK naming the gap (``agent.roce.packets.SELECTIVE_NAK``): its first PSN and how
many. A gap is NAKed once; if the NAK or a resend is lost, the requester's timer recovers.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Final

from agent.core.drops import DropReason
from agent.core.events import Event
from agent.core.memory import MemoryTable
from agent.core.psn import PSN_MASK, psn_diff
from agent.roce.config import RoceConfig
from agent.roce.packets import SELECTIVE_NAK, RoceAck, RoceData
from agent.roce.responder import Responder
from wire.constants import RoceOpcode

_ONLY: Final = frozenset(
    {int(RoceOpcode.RC_RDMA_WRITE_ONLY), int(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM)}
)
_FIRST: Final = int(RoceOpcode.RC_RDMA_WRITE_FIRST)
_MIDDLE: Final = int(RoceOpcode.RC_RDMA_WRITE_MIDDLE)
_LAST: Final = frozenset(
    {int(RoceOpcode.RC_RDMA_WRITE_LAST), int(RoceOpcode.RC_RDMA_WRITE_LAST_IMM)}
)


class _Write:
    """A write whose first packet arrived: where it goes and which PSNs (``seq``) it spans."""

    __slots__ = ("first", "immediate", "last", "length", "rkey", "unit", "va")

    def __init__(self, first: int, last: int, va: int, rkey: int, length: int, unit: int) -> None:
        self.first = first
        self.last = last
        self.va = va
        self.rkey = rkey
        self.length = length
        #: The payload of each of its packets but the last (the sender's PMTU).
        self.unit = unit
        self.immediate: int | None = None


class SelectiveResponder(Responder):
    """The receive side of one RC QP running selective repeat (see the module doc).

    PSNs are handled as plain ever-growing sequence numbers (``seq``) inside: the ePSN's is
    ``_seq``, and a packet ``d`` PSNs ahead of the ePSN has ``_seq + d``."""

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
        super().__init__(qp, dest_qp, expected_psn, config, memory, emit, pd)
        self._window = config.max_outstanding
        self._seq = 0
        #: The highest ``seq`` received (a packet beyond it + 1 reveals a gap).
        self._highest = -1
        #: ``seq`` of packets received ahead of the ePSN (placed or held).
        self._arrived: set[int] = set()
        #: Packets received before their write's FIRST, by ``seq``.
        self._held: dict[int, RoceData] = {}
        #: Writes whose FIRST arrived and that have not completed, by first ``seq``, and those
        #: first ``seq`` alone (sorted, for bisection).
        self._writes: list[_Write] = []
        self._firsts: list[int] = []

    def on_data(self, packet: RoceData, congested: bool, now: float) -> DropReason | None:
        """A data packet for this QP arrived (``congested``: CE-marked); returns why it was
        refused, if it was. Packets beyond the window are dropped and counted."""
        counters = self.counters
        if congested:
            self._on_marked(now)
        distance = psn_diff(packet.psn, self.expected_psn)
        if distance < 0:
            counters.duplicates_received += 1
            self._ack_due = True
            return None
        if distance >= self._window:
            counters.out_of_sequence += 1
            return None
        seq = self._seq + distance
        if distance > 0 and seq in self._arrived:
            counters.duplicates_received += 1
            self._ack_due = True
            return None
        refusal = self._place(seq, packet)
        if refusal is not None:
            return refusal
        counters.data_packets_received += 1
        counters.data_bytes_received += len(packet.payload)
        if seq > self._highest + 1:
            self._nak_gap(self._highest + 1, seq)
        if seq > self._highest:
            self._highest = seq
        if distance == 0:
            return self._advance()
        self._arrived.add(seq)
        counters.out_of_order_kept += 1
        return None

    def _nak_gap(self, start: int, end: int) -> None:
        """PSNs ``start`` up to ``end`` (excluded) are missing: one selective NAK says so."""
        psn = (self.expected_psn + start - self._seq) & PSN_MASK
        self._gap_naks.append(RoceAck(self._dest_qp, psn, SELECTIVE_NAK, end - start))

    # --- placement ------------------------------------------------------------------------

    def _place(self, seq: int, packet: RoceData) -> DropReason | None:
        """Write the packet where it goes, or hold it until its write's FIRST arrives."""
        opcode = packet.opcode
        if opcode == _FIRST or opcode in _ONLY:
            return self._begin(seq, packet)
        write = self._write_at(seq)
        if write is None:
            if seq == self._seq:  # everything before it arrived, and no write covers it
                return self._invalid(packet, "a write continued that never began")
            self._held[seq] = packet
            return None
        return self._continue(write, seq, packet)

    def _write_at(self, seq: int) -> _Write | None:
        """The known write whose PSNs include ``seq`` (None: none known)."""
        index = bisect_right(self._firsts, seq) - 1
        if index < 0:
            return None
        write = self._writes[index]
        return write if seq <= write.last else None

    def _begin(self, seq: int, packet: RoceData) -> DropReason | None:
        """A FIRST or ONLY packet: check the write's range, learn its PSNs, place what it
        carries and whatever of it was held."""
        length = packet.dma_length
        refusal = self._memory.check(packet.rkey, packet.va, length, self._pd)
        if refusal is not None:
            return self._refuse_access(refusal)
        size = len(packet.payload)
        if packet.opcode in _ONLY:
            if size != length:
                return self._invalid(packet, "an ONLY packet must carry the RETH's DMA length")
            count = 1
        else:
            if size == 0 or size % 4:
                return self._invalid(packet, "a FIRST or MIDDLE packet must carry whole PMTUs")
            if size >= length:
                return self._invalid(packet, "a FIRST packet must leave bytes to packets after it")
            count = -(-length // size)
        last = seq + count - 1
        index = bisect_left(self._firsts, seq)
        writes = self._writes
        if (index > 0 and writes[index - 1].last >= seq) or (
            index < len(writes) and writes[index].first <= last
        ):
            return self._invalid(packet, "a new write began before the last one ended")
        write = _Write(seq, last, packet.va, packet.rkey, length, size)
        writes.insert(index, write)
        self._firsts.insert(index, seq)
        if size:
            refusal = self._memory.write(write.rkey, write.va, packet.payload, self._pd)
            if refusal is not None:
                return self._refuse_access(refusal)
        if count == 1:
            write.immediate = packet.immediate
            return None
        held = self._held
        for later in sorted(s for s in held if seq < s <= last):
            refusal = self._continue(write, later, held.pop(later))
            if refusal is not None:
                return refusal
        return None

    def _continue(self, write: _Write, seq: int, packet: RoceData) -> DropReason | None:
        """A MIDDLE or LAST packet of a known write: check its opcode and size, place it."""
        opcode = packet.opcode
        size = len(packet.payload)
        if seq == write.last:
            if opcode not in _LAST:
                return self._invalid(packet, "a write's last PSN carried no LAST packet")
            if size != write.length - (write.last - write.first) * write.unit:
                return self._invalid(packet, "a LAST packet's bytes disagree with the RETH")
            write.immediate = packet.immediate
        elif opcode != _MIDDLE:
            return self._invalid(packet, "a packet inside a write is not a MIDDLE")
        elif size != write.unit:
            return self._invalid(packet, "a MIDDLE packet must carry what its FIRST did")
        if size:
            va = write.va + (seq - write.first) * write.unit
            refusal = self._memory.write(write.rkey, va, packet.payload, self._pd)
            if refusal is not None:  # the region was withdrawn since the write began
                return self._refuse_access(refusal)
        return None

    # --- the ePSN -------------------------------------------------------------------------

    def _advance(self) -> DropReason | None:
        """The packet at the ePSN was placed: move the ePSN past it and every packet kept
        after it, completing the writes it passes, in order."""
        seq = self._seq
        arrived = self._arrived
        held = self._held
        writes = self._writes
        passed = 0
        refusal: DropReason | None = None
        while True:
            if writes and writes[0].last == seq:
                write = writes.pop(0)
                self._firsts.pop(0)
                self._complete(write.rkey, write.va, write.length, write.immediate)
                self._ack_due = True
            passed += 1
            seq += 1
            if seq not in arrived:
                break
            arrived.discard(seq)
            stray = held.pop(seq, None)
            if stray is not None:  # every PSN before it arrived, and none began its write
                refusal = self._invalid(stray, "a write continued that never began")
                break
        self._seq = seq
        self.expected_psn = (self.expected_psn + passed) & PSN_MASK
        self._unacked += passed
        if self._unacked >= self._ack_every:
            self._ack_due = True
        return refusal
