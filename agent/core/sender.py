"""The sending half of a connection: messages to packets, and getting every packet delivered.

Two jobs live in modules of their own, as a QUIC stack keeps loss recovery apart from the
connection:

* ``agent.core.messages``: posting messages, cutting them into packets, and asking the
  receiver again for a message's completion (its ACK) when it is overdue;
* ``agent.core.recovery``: which packets are in flight, RACK loss detection, disputes of
  spurious losses, the RTO with its undo, and tail probes.

The ``Sender`` coordinates them: it numbers packets (PSNs, the outstanding bitmap and its
oldest PSN, ``una``), picks the next packet to send (resends first), applies the peer's
feedback (SACK, NACK and the ACK that completes a message) to both, and runs their timers.

Time is float seconds, passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from agent.core.cc.base import CongestionControl
from agent.core.config import MrcConfig
from agent.core.drops import DropReason
from agent.core.ev import EvEntry, EvSet
from agent.core.events import Event
from agent.core.messages import MessageQueue, SentPacket
from agent.core.packets import AckPacket, DataPacket, NackPacket, ReliabilityProbe, SackPacket
from agent.core.psn import MSN_MASK, PSN_MASK, psn_diff
from agent.core.recovery import Recovery
from agent.core.rtt import RttEstimator
from agent.core.stats import ConnectionCounters, RetransmitCause
from wire.constants import NackReason, SackSkipMode

#: Enum members as module constants: they are read for every packet or SACK, and an enum
#: attribute access is slow.
_SACK_GAP: Final = RetransmitCause.SACK_GAP
_SKIP_ONCE: Final = SackSkipMode.SKIP_ONCE
_ALWAYS_SKIP: Final = SackSkipMode.ALWAYS_SKIP


class Sender:
    """Sending half of one connection."""

    def __init__(
        self,
        config: MrcConfig,
        qp: int,
        remote_qp: int,
        initial_psn: int,
        ev_set: EvSet,
        cc: CongestionControl,
        rtt: RttEstimator,
        counters: ConnectionCounters,
        events: deque[Event],
    ) -> None:
        self._config = config
        self._ev_set = ev_set
        self.cc = cc
        self._rtt = rtt
        self._counters = counters
        self.messages = MessageQueue(config, qp, remote_qp, ev_set, rtt, counters, events)
        self.recovery = Recovery(config, remote_qp, ev_set, cc, rtt, counters)
        self._next_psn = initial_psn & PSN_MASK
        self._una = self._next_psn
        #: Every sent PSN not yet acknowledged (one record for all its copies).
        self._records: dict[int, SentPacket] = {}
        # bit i set: PSN una + i is sent and not yet acknowledged (a record exists)
        self._outstanding = 0
        self._outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]] = []
        #: Whether the controller paces (wants ``on_sent``); window-only ones skip the call.
        self._paced = cc.paced

    # --- posting --------------------------------------------------------------------------

    def can_post(self) -> bool:
        """Whether another message fits (see ``MessageQueue.can_post``)."""
        return self.messages.can_post()

    def post(
        self, data: bytes | memoryview, remote_va: int, rkey: int, immediate: int | None
    ) -> int:
        """Queue an RDMA write (see ``MessageQueue.post``); returns its MSN."""
        return self.messages.post(data, remote_va, rkey, immediate)

    def set_initial_psn(self, psn: int) -> None:
        """Number the first packet ``psn`` instead (a QP learns its send PSN only on its way
        to RTS, after it began to receive); ``ValueError`` once anything was sent."""
        if self._records or self._next_psn != self._una or self.messages.unconfirmed:
            raise ValueError("the send PSN can change only before anything is posted")
        self._next_psn = self._una = psn & PSN_MASK

    @property
    def has_unconfirmed(self) -> bool:
        """Whether any posted message still awaits the receiver's confirmation."""
        return bool(self.messages.unconfirmed)

    @property
    def rto_backoff(self) -> int:
        """Consecutive timeouts without progress (the RTO's backoff exponent)."""
        return self.recovery.backoff

    @property
    def reorder_multiplier(self) -> int:
        """The reordering window in base widths (1 until a spurious loss is seen)."""
        return self.recovery.reorder_mult

    @property
    def bytes_in_flight(self) -> int:
        """Payload bytes sent and neither acknowledged nor declared lost."""
        return self.recovery.bytes_in_flight

    @property
    def wants_to_send(self) -> bool:
        """Whether data (new or retransmitted) is waiting for window, pacing or an EV."""
        return bool(self.recovery.retx or self.messages.pending)

    @property
    def rqmsn(self) -> int:
        """The RQMSN data packets carry now: the oldest unconfirmed MSN."""
        return self.messages.rqmsn

    # --- data path ------------------------------------------------------------------------

    def next_transmission(self, now: float) -> SentPacket | None:
        """The next data packet to send now (retransmissions first), already accounted as
        sent on its EV (``rec.entry``), or None if the window, the PSN window or the lack of
        a usable EV holds everything back.

        The record, not a ``DataPacket``, is what the data path encodes from (see
        ``agent.core.data_encoder``): one object less per packet sent.
        """
        window = self.cc.window
        recovery = self.recovery
        if recovery.retx:
            rec = recovery.next_retransmission(now, window)
            if rec is not None or recovery.retx:
                return rec  # a resend, or None: the one due must wait
        if not self.messages.pending:
            return None
        batch = self._first_transmissions(now, 1, window)
        return batch[0] if batch else None

    def next_transmissions(self, now: float, limit: int) -> list[SentPacket]:
        """Up to ``limit`` data packets to send now, in order, each as ``next_transmission``
        would have returned it (retransmissions first); fewer when the window, the PSN window
        or the EVs hold the rest back.

        A burst of first transmissions is cut in one loop (``MessageQueue.cut``): this is
        what the sender does for nearly every packet, and one call per packet is costly.
        """
        out: list[SentPacket] = []
        retx = self.recovery.retx
        while retx and len(out) < limit:
            rec = self.next_transmission(now)
            if rec is None:
                return out
            out.append(rec)
        if self.messages.pending and len(out) < limit:
            out.extend(self._first_transmissions(now, limit - len(out), self.cc.window))
        return out

    def _first_transmissions(self, now: float, limit: int, window: int) -> list[SentPacket]:
        """Up to ``limit`` new packets, cut and accounted as sent."""
        recovery = self.recovery
        in_flight = recovery.in_flight
        psn = self._next_psn
        una = self._una
        # PSNs may run at most max_psn_window ahead of the oldest unacknowledged one.
        room = self._config.max_psn_window - ((psn - una) & PSN_MASK)
        if room < limit:
            limit = room
        was_idle = not in_flight
        out = self.messages.cut(now, limit, window, recovery.bytes_in_flight, psn, recovery.order)
        if not out:
            return out
        records = self._records
        sent_bytes = 0
        for rec in out:
            key = rec.psn
            records[key] = rec
            in_flight[key] = rec
            sent_bytes += rec.length
        if self._paced:
            cc = self.cc
            for rec in out:
                cc.on_sent(now, rec.length)
        last = out[-1]
        recovery.on_sent(now, was_idle, last.order, sent_bytes)
        # The burst's PSNs are consecutive: their outstanding bits are set in one go.
        count = len(out)
        first = out[0].psn
        outstanding = self._outstanding
        if not outstanding:
            una = first
        self._outstanding = outstanding | (((1 << count) - 1) << ((first - una) & PSN_MASK))
        self._una = una
        self._next_psn = (last.psn + 1) & PSN_MASK
        counters = self._counters
        counters.data_packets_sent += count
        counters.data_bytes_sent += sent_bytes
        return out

    def next_data_packet(self, now: float) -> tuple[DataPacket, EvEntry] | None:
        """``next_transmission`` as a ``DataPacket`` and its EV (for callers that want the
        packet as an object rather than encoded bytes)."""
        rec = self.next_transmission(now)
        if rec is None or rec.entry is None:
            return None
        return self.messages.data_packet(rec, retransmit=rec.transmissions > 1), rec.entry

    def take_outbox(self) -> list[tuple[DataPacket | ReliabilityProbe, EvEntry]]:
        """Probes and completion re-sends the timers produced, to go out now."""
        out, self._outbox = self._outbox, []
        return out

    # --- feedback -------------------------------------------------------------------------

    def on_sack(self, sack: SackPacket, now: float) -> DropReason | None:
        """Process a SACK; returns a drop reason if it cannot be ours."""
        cack = sack.cack_psn
        if psn_diff(cack, self._next_psn) > 0:
            return DropReason.UNEXPECTED
        recovery = self.recovery
        answered_psn = (cack + sack.ack_psn_offset) & PSN_MASK
        # PSNs this SACK reports, as bits relative to una: the cumulative part, then the bitmap.
        span = psn_diff(cack, self._una)
        reported = (1 << span) - 1 if span > 0 else 0
        shift = psn_diff((cack + sack.sack_offset) & PSN_MASK, self._una)
        bitmap = sack.bitmap
        if shift >= 0:
            reported |= bitmap << shift
        elif shift > -64:
            reported |= bitmap >> -shift
        newly = reported & self._outstanding
        una = self._una
        # The RTT sample first: confirmations scheduled while acknowledging use the RTO, and a
        # coalesced SACK may acknowledge a whole message together with its first sample.
        answered: SentPacket | None = None
        sample: float | None = None
        index = psn_diff(answered_psn, una)
        if not sack.probe_response:
            if index >= 0 and (newly >> index) & 1:
                answered = self._records[answered_psn]
                sample = recovery.sample(answered, sack.echoed_timestamp, now)
            else:
                recovery.late_answer(answered_psn, sack.echoed_timestamp)
        acked_bytes = 0
        rack = recovery.rack_order
        if newly:
            self._outstanding &= ~newly
            acked_bytes, rack = self._acknowledge_all(newly, una, answered, rack, now)
            self._advance_una()
        if sack.probe_response:
            rack = recovery.probe_answered(answered_psn, rack)
        elif answered is not None:
            rack = recovery.rack_evidence(answered, sample, rack)
            entry = answered.entry
            if entry is not None:
                if sack.skip_mode == _SKIP_ONCE:
                    self._ev_set.skip(entry)
                elif sack.skip_mode == _ALWAYS_SKIP:
                    self._ev_set.retire(entry, now)
        recovery.rack_order = rack
        ecn = sack.ecn_echo
        if ecn:
            self._counters.ecn_echoes += 1
            if answered is not None and answered.entry is not None:
                answered.entry.ecn_echoes += 1
        if acked_bytes or ecn:
            self.cc.on_ack(now, acked_bytes, sample, self._rtt.min_rtt, ecn)
        if acked_bytes:
            recovery.judge_timeout(now)
            recovery.progress(now)
        recovery.heard(now)
        recovery.detect_losses(now)
        return None

    def on_nack(self, nack: NackPacket, now: float) -> DropReason | None:
        """Process a NACK: a trimmed packet is resent at once."""
        reason = nack.reason
        if reason not in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self._counters.nacks_other += 1
            return None
        last_hop = reason == NackReason.TRIMMED_LASTHOP
        if last_hop:
            self._counters.trims_lasthop_seen += 1
        else:
            self._counters.trims_seen += 1
        rec = self._records.get(nack.nack_psn)
        if rec is None or not rec.in_flight or nack.tx_timestamp != rec.ts16:
            return None  # already acked, already being resent, or about an older copy
        if rec.entry is not None:
            rec.entry.trims += 1
        self.recovery.declare_lost(rec, RetransmitCause.NACK, now, front=True)
        if not last_hop and rec.entry is not None:
            self._ev_set.skip(rec.entry)
        self.cc.on_trim(now, last_hop, self._rtt.min_rtt)
        self.recovery.heard(now)
        return None

    def on_ack(self, ack: AckPacket, now: float) -> DropReason | None:
        """Process the receiver's completion report (ACK or NAK) for one message."""
        cumulative = ack.psn
        if psn_diff(cumulative, self._next_psn) > 0 or ack.msn > MSN_MASK:
            return DropReason.UNEXPECTED
        message = self.messages.unconfirmed.get(ack.msn)
        if message is not None and not message.segmented:
            return DropReason.UNEXPECTED
        span = psn_diff(cumulative, self._una)
        reported = (1 << span) - 1 if span > 0 else 0
        if message is not None:
            # The receiver has every byte: whatever of the message is outstanding was delivered.
            last = psn_diff(message.last_psn, self._una)
            if last >= 0:
                reported |= (1 << (last + 1)) - 1
        newly = reported & self._outstanding
        acked_bytes = 0
        records = self._records
        una = self._una
        while newly:
            low = newly & -newly
            newly ^= low
            rec = records[(una + low.bit_length() - 1) & PSN_MASK]
            if psn_diff(rec.psn, una) < span or rec.message is message:
                del records[rec.psn]
                self._outstanding &= ~low
                acked_bytes += self._acknowledge(rec, now)
        self._advance_una()
        if message is not None:
            self.messages.finish(message, ack.syndrome)
        if acked_bytes:
            self.recovery.progress(now)
        self.recovery.heard(now)
        return None

    def _acknowledge_all(
        self, newly: int, una: int, answered: SentPacket | None, rack: int, now: float
    ) -> tuple[int, int]:
        """Acknowledge every PSN whose bit (relative to ``una``) is set in ``newly``, as
        ``_acknowledge`` does one by one; returns the bytes acknowledged and the RACK order
        advanced over first transmissions other than ``answered``. Inlined because a
        coalesced SACK acknowledges up to 64 packets and this runs for every packet sent."""
        records = self._records
        recovery = self.recovery
        in_flight = recovery.in_flight
        ev_set = self._ev_set
        messages = self.messages
        acked_bytes = 0
        in_flight_bytes = 0
        count = 0
        oldest_original = -1  # send order of the first original acknowledged (lowest PSN)
        base = una
        while newly:
            # Skip the zeros below the lowest set bit, then take the run of ones above them
            # (in-order delivery acknowledges long runs) with two shifts, not three per PSN.
            skip = (newly & -newly).bit_length() - 1
            newly >>= skip
            base += skip
            run = (~newly & (newly + 1)).bit_length() - 1
            newly >>= run
            for psn in range(base, base + run):
                key = psn & PSN_MASK
                rec = records.pop(key)
                rec.acked = True
                length = rec.length
                if rec.in_flight:
                    rec.in_flight = False
                    del in_flight[key]
                    in_flight_bytes += length
                    entry = rec.entry
                    if entry is not None:  # EvSet.release inlined
                        entry.outstanding -= 1
                        if not entry.outstanding:
                            ev_set.offer(entry)
                acked_bytes += length
                message = rec.message
                message.unacked -= 1
                if message.unacked == 0 and message.segmented and not message.done:
                    messages.schedule_confirmation(message, now)
                if rec.transmissions == 1:
                    if oldest_original < 0:
                        oldest_original = rec.order
                    if rec.order > rack and rec is not answered:
                        rack = rec.order
                elif rec.lost_cause is _SACK_GAP:
                    recovery.dispute(rec)
            count += run
            base += run
        if oldest_original >= 0:
            recovery.originals_acknowledged(oldest_original, now)
        recovery.bytes_in_flight -= in_flight_bytes
        counters = self._counters
        counters.packets_acked += count
        counters.bytes_acked += acked_bytes
        return acked_bytes, rack

    def _acknowledge(self, rec: SentPacket, now: float) -> int:
        rec.acked = True
        self.recovery.acknowledged(rec, now)
        counters = self._counters
        counters.packets_acked += 1
        counters.bytes_acked += rec.length
        message = rec.message
        message.unacked -= 1
        if message.unacked == 0 and message.segmented and not message.done:
            self.messages.schedule_confirmation(message, now)
        return rec.length

    def _advance_una(self) -> None:
        """Move una to the oldest unacknowledged PSN (or next_psn when none is)."""
        outstanding = self._outstanding
        if not outstanding:
            self._una = self._next_psn
            return
        run = (outstanding & -outstanding).bit_length() - 1
        if run:
            self._outstanding = outstanding >> run
            self._una = (self._una + run) & PSN_MASK

    # --- timers ---------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """The earliest time ``on_timer`` has work, or None."""
        recovery = self.recovery.next_timer()
        confirmation = self.messages.next_timer()
        if recovery is None:
            return confirmation
        if confirmation is None:
            return recovery
        return min(recovery, confirmation)

    def on_timer(self, now: float) -> None:
        """Run whatever timers are due at ``now`` (loss detection, RTO, tail probe, overdue
        completions); what they send waits in ``take_outbox``."""
        self.recovery.on_timer(now, self._outbox)
        self.messages.on_timer(now, self._outbox)

    def on_path_answered(self, now: float) -> None:
        """An EV probe was answered (see ``Recovery.on_path_answered``)."""
        self.recovery.on_path_answered(now)

    # --- teardown -------------------------------------------------------------------------

    def fail_all(self, reason: str) -> None:
        """The connection died: every unconfirmed message fails with ``reason``."""
        self.messages.fail_all(reason)
        self._records.clear()
        self._outstanding = 0
        self._una = self._next_psn
        self.recovery.clear()
