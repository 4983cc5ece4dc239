"""The receiving half of a connection: place writes, track PSNs, answer every packet.

* PSN tracking: ``cack`` (every PSN before it arrived) and a bitmask of PSNs that arrived above
  it, bounded by ``max_psn_window``. A PSN behind ``cack`` or already in the mask is a
  duplicate: nothing is placed twice, it is only answered again. A PSN beyond the window is
  dropped (and counted by the caller).
* Placement: RETH says where each packet's bytes go, so packets are written into the region as
  they arrive, in any order, after the R_Key and bounds checks. A message completes once
  ``dma_length`` bytes are accounted for; it is then reported (``MessageReceived``) and
  confirmed to the sender with an ACK. A refused write still consumes its PSN (so the
  connection keeps moving) but nothing is written; the message ends in a NAK
  (REMOTE_ACCESS_ERROR) and a ``WriteRejected`` event.
* Answers: a NACK for every trimmed header (TRIMMED or TRIMMED_LASTHOP, from its DSCP), a
  SACK with the probe bit for every reliability probe, a SACK for every duplicate. A duplicate
  of a finished message also repeats that message's ACK/NAK, because the sender only resends a
  finished message's last packet when that ACK went missing; it does so however far behind
  ``cack`` the packet is (then with the ACK alone: a SACK cannot point that far back).
* Data SACKs are coalesced: one SACK answers every data packet that arrived since the last
  one, because at line rate a SACK per packet costs the sender as much as sending does. The
  SACK echoes the EV and timestamp of the latest packet (its RTT sample and the EV the sender
  hears about); its cumulative PSN and bitmap acknowledge all the others, and the sender
  releases each packet's EV from that. A pending SACK goes out (``flush_sack``) when the
  caller has nothing more to hand over (the runtime: after a receive batch; the simulator:
  after every datagram), after ``sack_coalesce_max`` packets, before a packet the bitmap
  could not cover together with the pending ones (PSN spread of 64 or more among those at or
  above the cumulative PSN: a resend that fills the hole cack waited at is acknowledged by
  the cumulative PSN and forces nothing out, which saved two SACKs per loss), and before any
  other answer, so answers keep their order. A message's completion ACK is the exception
  that proves it: it waits behind the pending SACK rather than forcing it out, because a
  flush per message added many SACKs at line rate (the runtime's batches hold most of a
  64-packet message), each costly for the sender to process. A CE-marked packet is
  answered at once: its ECN echo must steer the sender away from exactly that EV.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Final

from agent.core.config import MrcConfig
from agent.core.drops import DropReason
from agent.core.events import Event, MessageReceived, WriteRejected
from agent.core.memory import MemoryTable
from agent.core.packets import (
    AckPacket,
    DataPacket,
    NackPacket,
    Packet,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from agent.core.psn import PSN_MASK, psn_diff
from agent.core.stats import ConnectionCounters
from wire.constants import (
    CC_FLAG_ECN_ECHO,
    IMM_OPCODES,
    AethSyndrome,
    NackReason,
    Opcode,
    SackSkipMode,
)

_BITMAP_BITS: Final = 64
_BITMAP_MASK: Final = (1 << _BITMAP_BITS) - 1
_MAX_OFFSET: Final = 0x7FFF
_PSN_HALF: Final = 1 << 23
_U24: Final = 0xFFFFFF
#: Enum members read per SACK, as constants (an enum attribute access is slow).
_SKIP_ONCE: Final = SackSkipMode.SKIP_ONCE
_NO_SKIP: Final = SackSkipMode.NONE
_ONLY_OPCODES: Final = frozenset({Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM})
_IMM_OPCODE_SET: Final = frozenset(int(op) for op in IMM_OPCODES)


class _Assembly:
    """A message being received."""

    __slots__ = ("accounted", "immediate", "length", "refusal", "rkey", "start_va")

    def __init__(self, length: int, rkey: int, va: int) -> None:
        self.length = length
        self.rkey = rkey
        self.start_va = va
        self.accounted = 0
        self.immediate: int | None = None
        self.refusal: DropReason | None = None


class Receiver:
    """Receiving half of one connection.

    Each ``on_*`` method appends the packets to send back to ``replies`` and returns a
    ``DropReason`` when the input is dropped instead of processed.
    """

    def __init__(
        self,
        config: MrcConfig,
        qp: int,
        remote_qp: int,
        initial_psn: int,
        memory: MemoryTable,
        counters: ConnectionCounters,
        events: deque[Event],
        pd: int = 0,
    ) -> None:
        self._qp = qp
        self._pd = pd
        self._remote_qp = remote_qp
        self._window = config.max_psn_window
        self._max_assemblies = config.max_unconfirmed_messages
        self._history_size = config.completion_history
        self._memory = memory
        self._counters = counters
        self._events = events
        self.cack = initial_psn & PSN_MASK
        self._mask = 0  # bit i: PSN cack + i arrived (bit 0 is never set)
        self._received_bytes = 0
        self._assemblies: dict[int, _Assembly] = {}
        self._outcomes: OrderedDict[int, int] = OrderedDict()  # msn -> AETH syndrome
        self._coalesce_max = config.sack_coalesce_max
        # The data packets not yet answered: how many, the lowest and highest PSN among them,
        # and the latest one's PSN, EV and timestamp (what the SACK will echo).
        self._unanswered = 0
        #: Completion ACKs of messages finished while a SACK was pending: they follow it out.
        self._acks_behind_sack: list[Packet] = []
        self._unanswered_low: int | None = None
        self._unanswered_high = 0
        self._latest_psn = 0
        self._latest_ev = 0
        self._latest_timestamp = 0

    def on_data(
        self, packet: DataPacket, ev: int, ce: bool, replies: list[Packet]
    ) -> DropReason | None:
        """A data packet arrived on EV ``ev``; ``ce``: it was CE-marked."""
        return self.on_data_fields(
            packet.opcode, packet.psn, packet.msn, packet.va, packet.rkey, packet.dma_length,
            packet.payload, packet.immediate, packet.tx_timestamp, ev, ce, replies,
        )  # fmt: skip

    def on_data_fields(
        self,
        opcode: int,
        psn: int,
        msn: int,
        va: int,
        rkey: int,
        dma_length: int,
        payload: bytes,
        immediate: int | None,
        tx_timestamp: int | None,
        ev: int,
        ce: bool,
        replies: list[Packet],
    ) -> DropReason | None:
        """``on_data`` from the packet's fields (the runtime's per-packet path builds no
        ``DataPacket``: see ``agent.core.codec.decode_whole_data_fields``)."""
        counters = self._counters
        cack = self.cack
        offset = ((psn - cack + _PSN_HALF) & PSN_MASK) - _PSN_HALF  # psn_diff, inlined
        mask = self._mask
        window = self._window
        if offset < 0 or (offset < window and (mask >> offset) & 1):
            self.flush_sack(replies)
            return self._duplicate(psn, msn, tx_timestamp, offset, ev, ce, replies)
        if offset >= window:
            return DropReason.OUT_OF_WINDOW
        size = len(payload)
        length = dma_length
        if size > length or (opcode in _ONLY_OPCODES and size != length):
            return DropReason.BAD_FIELD
        assembly = self._assemblies.get(msn)
        if assembly is None:
            if msn in self._outcomes or len(self._assemblies) >= self._max_assemblies:
                return DropReason.UNEXPECTED
            assembly = _Assembly(length, rkey, va)
            self._assemblies[msn] = assembly
        elif assembly.length != length or assembly.rkey != rkey:
            return DropReason.BAD_FIELD
        # The PSN is consumed from here on, whether the bytes are placed or refused.
        mask |= 1 << offset
        if offset == 0:  # cack moves over the run of arrived PSNs it now heads
            inverted = ~mask
            run = (inverted & -inverted).bit_length() - 1  # trailing ones
            mask >>= run
            self.cack = (cack + run) & PSN_MASK
        self._mask = mask
        if ce:
            counters.ecn_marks_received += 1
        refusal = self._memory.write(rkey, va, payload, self._pd) if size else None
        if refusal is None:
            counters.data_packets_received += 1
            counters.data_bytes_received += size
            self._received_bytes += size
            if va < assembly.start_va:
                assembly.start_va = va
        else:
            counters.writes_rejected += 1
            assembly.refusal = refusal
        if opcode in _IMM_OPCODE_SET:
            assembly.immediate = immediate
        assembly.accounted += size
        self._answer(psn, ev, ce, tx_timestamp or 0, replies)
        if assembly.accounted >= assembly.length:
            self._complete(msn, assembly, replies)
        return refusal

    def _answer(self, psn: int, ev: int, ce: bool, timestamp: int, replies: list[Packet]) -> None:
        """Acknowledge new data packet ``psn``: at once if CE-marked, otherwise coalesced."""
        cack = self.cack
        # A PSN behind cack (a resend that filled the hole cack waited at, a late packet) is
        # acknowledged by the cumulative PSN: only the others need room in the bitmap, which
        # ends at ``high`` and reaches 63 PSNs below it. ``low``: the lowest unanswered PSN
        # that was above cack when it arrived (None: none was); psn_diff inlined, per packet.
        above = (psn - cack) & PSN_MASK < _PSN_HALF
        if self._unanswered:
            low = self._unanswered_low
            high = self._unanswered_high
            if 0 < (psn - high) & PSN_MASK < _PSN_HALF:
                high = psn
            if above and (low is None or 0 < (low - psn) & PSN_MASK < _PSN_HALF):
                low = psn
            if low is not None:
                # cack past ``low`` since: the lowest one above it is not known, count from cack.
                low_offset = ((low - cack + _PSN_HALF) & PSN_MASK) - _PSN_HALF
                spread = ((high - cack + _PSN_HALF) & PSN_MASK) - _PSN_HALF
                if low_offset > 0:
                    spread -= low_offset
            else:
                spread = 0
            if ce or spread >= _BITMAP_BITS:
                self.flush_sack(replies)
                low = psn if above else None
                high = psn
        else:
            low = psn if above else None
            high = psn
        if ce:
            replies.append(self._sack(psn, psn, ev, True, timestamp, probe=False))
            return
        self._unanswered += 1
        self._unanswered_low = low
        self._unanswered_high = high
        self._latest_psn = psn
        self._latest_ev = ev
        self._latest_timestamp = timestamp
        if self._unanswered >= self._coalesce_max:
            self.flush_sack(replies)

    @property
    def sack_pending(self) -> bool:
        """Whether data packets await their (coalesced) SACK."""
        return self._unanswered > 0

    @property
    def pending_sack_ev(self) -> int:
        """The EV the pending SACK answers (the latest data packet's); meaningful only while
        ``sack_pending``."""
        return self._latest_ev

    def flush_sack(self, replies: list[Packet]) -> None:
        """Send the SACK answering every data packet not yet answered, if there are any."""
        if self._unanswered:
            self._unanswered = 0
            replies.append(
                self._sack(
                    self._latest_psn,
                    self._unanswered_high,
                    self._latest_ev,
                    False,
                    self._latest_timestamp,
                    probe=False,
                )
            )
            if self._acks_behind_sack:
                replies.extend(self._acks_behind_sack)
                self._acks_behind_sack.clear()

    def on_trimmed(
        self, header: TrimmedDataHeader, ev: int, last_hop: bool, ce: bool, replies: list[Packet]
    ) -> DropReason | None:
        """A trimmed data header arrived: NACK it so the sender resends at once."""
        offset = psn_diff(header.psn, self.cack)
        if offset >= self._window:
            return DropReason.OUT_OF_WINDOW
        self.flush_sack(replies)
        self._counters.trims_received += 1
        if offset < 0 or (self._mask >> offset) & 1:
            # A copy already arrived whole: tell the sender so instead of asking for another.
            if offset < -_MAX_OFFSET:
                return DropReason.OUT_OF_WINDOW
            replies.append(
                self._sack(header.psn, header.psn, ev, ce, header.tx_timestamp or 0, probe=False)
            )
            return None
        replies.append(
            NackPacket(
                dest_qp=self._remote_qp,
                psn=self.cack,
                reason=NackReason.TRIMMED_LASTHOP if last_hop else NackReason.TRIMMED,
                nack_psn=header.psn,
                entropy=ev,
                src_pdc=self._qp & 0xFFFF,
                dst_pdc=self._remote_qp & 0xFFFF,
                cc_flags=CC_FLAG_ECN_ECHO if ce else 0,
                tx_timestamp=header.tx_timestamp or 0,
            )
        )
        return None

    def on_probe(
        self, probe: ReliabilityProbe, ev: int, replies: list[Packet]
    ) -> DropReason | None:
        """A reliability probe: answer with the current SACK state, marked as a probe answer."""
        offset = psn_diff(probe.psn, self.cack)
        if not -_MAX_OFFSET <= offset < self._window:
            return DropReason.OUT_OF_WINDOW
        self.flush_sack(replies)
        replies.append(self._sack(probe.psn, probe.psn, ev, False, 0, probe=True))
        return None

    def _duplicate(
        self,
        psn: int,
        msn: int,
        tx_timestamp: int | None,
        offset: int,
        ev: int,
        ce: bool,
        replies: list[Packet],
    ) -> DropReason | None:
        syndrome = self._outcomes.get(msn)
        if offset < -_MAX_OFFSET:
            # Too far behind for a SACK's signed 16-bit offset, but a finished message's
            # last packet is the sender asking for the ACK it lost: its completion probes
            # back off while later messages move cack on, and left unanswered the message
            # stayed unconfirmed until the peer timeout failed it.
            if syndrome is None:
                return DropReason.OUT_OF_WINDOW
            self._counters.duplicates_received += 1
            replies.append(AckPacket(self._remote_qp, self.cack, syndrome, msn))
            return None
        self._counters.duplicates_received += 1
        replies.append(self._sack(psn, psn, ev, ce, tx_timestamp or 0, probe=False))
        if syndrome is not None:
            replies.append(AckPacket(self._remote_qp, self.cack, syndrome, msn))
        return None

    def _sack(
        self, psn: int, top: int, ev: int, ce: bool, timestamp: int, probe: bool
    ) -> SackPacket:
        """A SACK answering ``psn``, its bitmap placed to cover ``top`` (>= ``psn``) and the 63
        PSNs below it."""
        top_offset = psn_diff(top, self.cack)
        base = top_offset - (_BITMAP_BITS - 1) if top_offset >= _BITMAP_BITS else 0
        mask = self._mask
        return SackPacket(
            dest_qp=self._remote_qp,
            psn=self.cack,
            cack_psn=self.cack,
            ack_psn_offset=psn_diff(psn, self.cack),
            entropy=ev,
            bitmap=(mask >> base) & _BITMAP_MASK,
            sack_offset=base,
            skip_mode=_SKIP_ONCE if ce else _NO_SKIP,
            probe_response=probe,
            src_pdc=self._qp & 0xFFFF,
            dst_pdc=self._remote_qp & 0xFFFF,
            cc_flags=CC_FLAG_ECN_ECHO if ce else 0,
            echoed_timestamp=timestamp,
            out_of_order_count=min(mask.bit_count(), _MAX_OFFSET),
            received_bytes=self._received_bytes & _U24,
        )

    def _complete(self, msn: int, assembly: _Assembly, replies: list[Packet]) -> None:
        del self._assemblies[msn]
        if assembly.refusal is None:
            syndrome = AethSyndrome.ACK
            self._counters.messages_received += 1
            self._events.append(
                MessageReceived(
                    self._qp,
                    msn,
                    assembly.rkey,
                    assembly.start_va,
                    assembly.length,
                    assembly.immediate,
                )
            )
        else:
            syndrome = AethSyndrome.NAK_REMOTE_ACCESS_ERROR
            self._events.append(WriteRejected(self._qp, msn, assembly.refusal.value))
        outcomes = self._outcomes
        outcomes[msn] = syndrome
        if len(outcomes) > self._history_size:
            outcomes.popitem(last=False)
        ack = AckPacket(self._remote_qp, self.cack, syndrome, msn)
        if self._unanswered:
            self._acks_behind_sack.append(ack)  # after the SACK of the packets before it
        else:
            replies.append(ack)
