"""The sending half of a connection: messages to packets, and getting every packet delivered.

Reliability, in the order a packet meets it:

* A message is an RDMA write of ``length`` bytes at ``remote_va``; it is cut into packets of
  ``payload_size`` on demand (so the window, not the message size, decides what is built).
  Each packet gets the next PSN and the next EV of the rotation; every copy is timestamped.
* SACKs acknowledge cumulatively and by bitmap. RACK-style loss detection: a packet is lost
  once a packet *sent after it* has been acknowledged and it is older than
  ``srtt + reorder window`` (the window absorbs the spread of path delays). A lost packet's EV
  is retired at once (a silent loss means a broken path) and the packet is resent on another;
  if the original is answered after all, the window widens and the EV gets its slot back.
* A NACK for a trimmed packet (matched to its latest copy by the echoed timestamp) resends it
  at the head of the queue, without waiting for anything; its EV is merely skipped once.
* A reliability probe (0xDE) is sent when the tail of a flight goes unanswered for two smoothed
  RTTs; its SACK gives loss detection the later-sent evidence a tail lacks.
* The RTO is the last resort: nothing acknowledged for an RTO declares the *oldest* packet in
  flight lost, retires its EV alone and backs off exponentially until progress resumes. A
  timeout says "nothing came back", which a queue holding seconds of packets says as well as a
  dead path: resending the whole flight multiplied the load of an already congested path, and
  retiring every EV in flight emptied the set on one spurious timeout. If the head was really
  lost, the answer to its copy gives loss detection the later-sent evidence for the rest.
* Every copy's timestamp is kept, so an answer to an earlier copy (a spurious retransmission)
  is still an RTT sample: matching only the latest copy took no sample at all once the RTO was
  below the RTT, and the RTO then never grew to it.
* A message is only *done* when the receiver's ACK (AETH) for it arrives: that ACK says every
  byte was placed. If SACKs covered every packet but the ACK does not come within an RTO, the
  message's last packet is sent again; the receiver answers a duplicate of a finished message
  by repeating its ACK (or NAK).

Time is float seconds, passed in; nothing here reads a clock.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Final, TypeVar

from agent.core.cc.base import CongestionControl
from agent.core.config import MrcConfig
from agent.core.drops import DropReason
from agent.core.ev import EvEntry, EvSet
from agent.core.events import Event, MessageAcked, MessageFailed
from agent.core.packets import AckPacket, DataPacket, NackPacket, ReliabilityProbe, SackPacket
from agent.core.psn import MSN_MASK, PSN_MASK, psn_diff
from agent.core.rtt import RttEstimator
from agent.core.stats import ConnectionCounters, RetransmitCause
from wire.constants import IMM_OPCODES, AethSyndrome, NackReason, Opcode, SackSkipMode

_IMM_OPCODE_SET: Final = frozenset(int(op) for op in IMM_OPCODES)
_MAX_MESSAGE: Final = 0xFFFFFFFF  # RETH dma_length is 32 bits
_MAX_VA: Final = (1 << 64) - 1
_US: Final = 1_000_000
_WRITE_MIDDLE: Final = int(Opcode.WRITE_MIDDLE)
#: Enum members as module constants: on Python 3.11 ``RetransmitCause.TIMEOUT`` costs ~0.3 us
#: per access (enum descriptors), and these are read for every packet or SACK.
_SACK_GAP: Final = RetransmitCause.SACK_GAP
_TIMEOUT: Final = RetransmitCause.TIMEOUT
_NACK: Final = RetransmitCause.NACK
_SKIP_ONCE: Final = SackSkipMode.SKIP_ONCE
_ALWAYS_SKIP: Final = SackSkipMode.ALWAYS_SKIP
#: Resent SACK-gap losses remembered for a late original to disprove (see ``_disputed``).
_DISPUTED_MAX: Final = 1024
_V = TypeVar("_V")


class SendQueueFull(Exception):
    """The connection already holds ``max_unconfirmed_messages`` unconfirmed messages."""


class OutboundMessage:
    """A posted RDMA write and its progress."""

    __slots__ = (
        "confirm_attempts",
        "data",
        "done",
        "immediate",
        "last_psn",
        "length",
        "msn",
        "next_offset",
        "remote_va",
        "rkey",
        "segmented",
        "unacked",
    )

    def __init__(
        self, msn: int, data: bytes, remote_va: int, rkey: int, immediate: int | None
    ) -> None:
        self.msn = msn
        self.data = memoryview(data)
        self.length = len(data)
        self.remote_va = remote_va
        self.rkey = rkey
        self.immediate = immediate
        self.next_offset = 0
        self.last_psn = 0
        self.segmented = False
        self.unacked = 0
        self.done = False
        self.confirm_attempts = 0


class SentPacket:
    """One data packet (all its copies): where its bytes come from and its latest transmission."""

    __slots__ = (
        "acked",
        "earlier_copies",
        "entry",
        "in_flight",
        "length",
        "lost_cause",
        "message",
        "offset",
        "opcode",
        "order",
        "psn",
        "sent_time",
        "transmissions",
        "ts16",
    )

    def __init__(
        self,
        psn: int,
        message: OutboundMessage,
        offset: int,
        length: int,
        opcode: int,
        entry: EvEntry | None = None,
        sent_time: float = 0.0,
        ts16: int = 0,
        order: int = 0,
    ) -> None:
        # A record made with an ``entry`` is one being sent for the first time (the data
        # path fills in its first transmission here rather than field by field afterwards).
        self.psn = psn
        self.message = message
        self.offset = offset
        self.length = length
        self.opcode = opcode
        self.entry = entry
        self.sent_time = sent_time
        self.ts16 = ts16
        self.order = order
        self.transmissions = 0 if entry is None else 1
        #: (ts16, sent_time) of each copy before the latest, None until a retransmission.
        self.earlier_copies: list[tuple[int, float]] | None = None
        self.in_flight = entry is not None
        self.acked = False
        self.lost_cause = _TIMEOUT


def _rtt_sample(rec: SentPacket, echoed_ts16: int, now: float) -> float | None:
    """The RTT of the copy of ``rec`` whose timestamp the peer echoed, or None if it echoes
    none of them (a copy from before a 16-bit wrap, or not ours)."""
    if echoed_ts16 == rec.ts16:
        return now - rec.sent_time
    if rec.earlier_copies is not None:
        for ts16, sent_time in reversed(rec.earlier_copies):
            if ts16 == echoed_ts16:
                return now - sent_time
    return None


def _remember(table: dict[int, _V], psn: int, value: _V) -> None:
    """Keep ``value`` for ``psn`` in a table bounded at ``_DISPUTED_MAX`` entries, forgetting
    the oldest first (what a late answer may still refer to, kept only so long)."""
    if len(table) >= _DISPUTED_MAX:
        del table[next(iter(table))]
    table[psn] = value


def _opcode(first: bool, last: bool, immediate: bool) -> int:
    if first and last:
        return Opcode.WRITE_ONLY_IMM if immediate else Opcode.WRITE_ONLY
    if first:
        return Opcode.WRITE_FIRST
    if last:
        return Opcode.WRITE_LAST_IMM if immediate else Opcode.WRITE_LAST
    return Opcode.WRITE_MIDDLE


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
        self._qp = qp
        self._remote_qp = remote_qp
        self._ev_set = ev_set
        self.cc = cc
        self._rtt = rtt
        self._counters = counters
        self._events = events
        self._mss = config.payload_size
        self._next_psn = initial_psn & PSN_MASK
        self._una = self._next_psn
        self._next_msn = 0
        self._pending: deque[OutboundMessage] = deque()
        self._unconfirmed: dict[int, OutboundMessage] = {}
        self._records: dict[int, SentPacket] = {}
        # bit i set: PSN una + i is sent and not yet acknowledged (a record exists)
        self._outstanding = 0
        self._in_flight: dict[int, SentPacket] = {}
        self._retx: deque[SentPacket] = deque()
        self.bytes_in_flight = 0
        self._order = 0
        self._rack_order = 0
        #: RTT of the latest answered packet that moved the RACK order (RFC 8985's RACK.rtt):
        #: a packet sent before it is lost only once older than that RTT plus the reordering
        #: window. srtt alone lags a queue that grows by seconds, and declared lost packets
        #: that were only queued behind the ones answered.
        self._rack_rtt = 0.0
        #: RFC 8985's reo_wnd_mult: the reordering window in base widths. A SACK-gap loss
        #: disproved by the answer to the copy declared lost adds one, at most once per flight
        #: (a packet sent after the last widening must be the one disproved);
        #: ``reorder_window_persist`` loss episodes without another bring it back to 1.
        self._reorder_mult = 1
        self._reorder_widened_at_order = 0
        self._loss_episodes_since_widening = 0
        #: PSN -> (timestamp of the copy declared lost, order) of packets declared lost from a
        #: SACK gap whose resend was acknowledged first: the receiver SACKs a duplicate with its
        #: timestamp, so a late original can still disprove the loss (RFC 2883's D-SACK).
        #: Bounded; oldest forgotten first.
        self._disputed: dict[int, tuple[int, int]] = {}
        #: PSN -> (home EV its SACK-gap loss retired, that EV's loss count then): if the loss
        #: is disproved and the EV lost nothing else since, it takes its slot back at once
        #: (it was reordering, not a broken path). Bounded like ``_disputed``.
        self._retired_by: dict[int, tuple[EvEntry, int]] = {}
        self._loss_deadline: float | None = None
        self._backoff = 0
        #: The packet an RTO resends: it goes out whatever the window says, as TCP's RTO
        #: retransmission does, or a flight lost whole (an outage) would hold it back forever.
        self._rto_resend: SentPacket | None = None
        #: The packet the latest RTO declared lost, until its fate is known: acknowledged
        #: sooner after its resend than any round trip takes (or before the resend left), the
        #: answer was to the original, the RTO was spurious, and the controller's timeout
        #: reduction is undone (RFC 4015's Eifel response).
        self._rto_victim: SentPacket | None = None
        #: An answered EV probe may bring the next resend forward once per timeout, not once
        #: per answer: probes keep being answered through a long queue, and each answer
        #: resending a packet would add load to exactly the path that is slow.
        self._early_resend_allowed = False
        #: Whether the last RTO looks spurious: a first transmission was acknowledged since
        #: (the flight was queued, not lost: F-RTO's test), or it fired before any RTT sample
        #: (``rto_initial`` is a guess, and a copy it sends on an emptier path overtakes
        #: originals that are only queued).
        self._last_rto_spurious = False
        self._last_progress = 0.0
        self._last_ack_time = 0.0
        self._last_send = 0.0
        self._probe_outstanding = False
        self._probe_psn = 0
        self._probe_order = 0
        self._confirm_heap: list[tuple[float, int, int, int]] = []
        self._confirm_seq = 0
        self._outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]] = []
        #: Whether the controller paces (wants ``on_sent``); window-only ones skip the call.
        self._paced = cc.paced

    # --- posting --------------------------------------------------------------------------

    def can_post(self) -> bool:
        """Whether another message fits (see ``MrcConfig.max_unconfirmed_messages``)."""
        return len(self._unconfirmed) < self._config.max_unconfirmed_messages

    def post(self, data: bytes, remote_va: int, rkey: int, immediate: int | None) -> int:
        """Queue an RDMA write of ``data`` to ``remote_va`` in the peer's region ``rkey``.

        Returns the message's MSN. Raises ``ValueError`` for arguments that cannot go on the
        wire and ``SendQueueFull`` when too many messages are unconfirmed.
        """
        if len(data) > _MAX_MESSAGE:
            raise ValueError(f"a message is at most {_MAX_MESSAGE} bytes, got {len(data)}")
        if not 0 <= remote_va <= _MAX_VA - len(data):
            raise ValueError(f"remote address {remote_va:#x} + {len(data)} exceeds 64 bits")
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError(f"R_Key {rkey} is not a 32-bit value")
        if immediate is not None and not 0 <= immediate <= 0xFFFFFFFF:
            raise ValueError(f"immediate {immediate} is not a 32-bit value")
        if not self.can_post():
            raise SendQueueFull(
                f"{len(self._unconfirmed)} messages unconfirmed "
                f"(max_unconfirmed_messages={self._config.max_unconfirmed_messages})"
            )
        msn = self._next_msn
        self._next_msn = (msn + 1) & MSN_MASK
        message = OutboundMessage(msn, bytes(data), remote_va, rkey, immediate)
        self._pending.append(message)
        self._unconfirmed[msn] = message
        self._counters.messages_posted += 1
        return msn

    @property
    def has_unconfirmed(self) -> bool:
        """Whether any posted message still awaits the receiver's confirmation."""
        return bool(self._unconfirmed)

    @property
    def rto_backoff(self) -> int:
        """Consecutive timeouts without progress (the RTO's backoff exponent)."""
        return self._backoff

    @property
    def wants_to_send(self) -> bool:
        """Whether data (new or retransmitted) is waiting for window, pacing or an EV."""
        return bool(self._retx or self._pending)

    # --- data path ------------------------------------------------------------------------

    def next_transmission(self, now: float) -> SentPacket | None:
        """The next data packet to send now (retransmissions first), already accounted as
        sent on its EV (``rec.entry``), or None if the window, the PSN window or the lack of
        a usable EV holds everything back.

        The record, not a ``DataPacket``, is what the data path encodes from (see
        ``agent.core.data_encoder``): one object less per packet sent.
        """
        window = self.cc.window
        retx = self._retx
        while retx:
            rec = retx[0]
            if rec.acked or rec.in_flight:
                retx.popleft()
                continue
            exempt = rec is self._rto_resend
            if not exempt and self.bytes_in_flight and self.bytes_in_flight + rec.length > window:
                return None
            entry = self._ev_set.next_for_data()
            if entry is None:
                return None
            retx.popleft()
            if exempt:
                self._rto_resend = None
            self._counters.retransmits[rec.lost_cause] += 1
            self._transmit(rec, entry, now)
            return rec
        if not self._pending:
            return None
        batch = self._first_transmissions(now, 1, window)
        return batch[0] if batch else None

    def next_transmissions(self, now: float, limit: int) -> list[SentPacket]:
        """Up to ``limit`` data packets to send now, in order, each as ``next_transmission``
        would have returned it (retransmissions first); fewer when the window, the PSN window
        or the EVs hold the rest back.

        A burst of first transmissions is cut in one loop over local state: this is what the
        sender does for nearly every packet, and one call per packet cost a tenth of its time.
        """
        out: list[SentPacket] = []
        while self._retx and len(out) < limit:
            rec = self.next_transmission(now)
            if rec is None:
                return out
            out.append(rec)
        if self._pending and len(out) < limit:
            out.extend(self._first_transmissions(now, limit - len(out), self.cc.window))
        return out

    def _first_transmissions(self, now: float, limit: int, window: int) -> list[SentPacket]:
        """Up to ``limit`` new packets cut from the pending messages, accounted as sent (the
        first-transmission half of ``_transmit``, inlined)."""
        out: list[SentPacket] = []
        pending = self._pending
        ev_set = self._ev_set
        next_for_data = ev_set.next_for_data
        records = self._records
        in_flight = self._in_flight
        max_psn_window = self._config.max_psn_window
        mss = self._mss
        paced = self._paced
        cc = self.cc
        ts16 = int(now * _US) & 0xFFFF
        psn = self._next_psn
        una = self._una
        outstanding = self._outstanding
        order = self._order
        bytes_in_flight = self.bytes_in_flight
        sent_bytes = 0
        was_idle = not in_flight
        count = 0
        while pending and count < limit:
            if (psn - una) & PSN_MASK >= max_psn_window:
                break
            message = pending[0]
            offset = message.next_offset
            length = message.length - offset
            if length > mss:
                length = mss
            if bytes_in_flight and bytes_in_flight + length > window:
                break
            entry = next_for_data()
            if entry is None:
                break
            end = offset + length
            last = end >= message.length
            if offset and not last:
                opcode = _WRITE_MIDDLE  # most packets of a message
            else:
                opcode = _opcode(offset == 0, last, message.immediate is not None)
            order += 1
            rec = SentPacket(psn, message, offset, length, opcode, entry, now, ts16, order)
            records[psn] = rec
            in_flight[psn] = rec
            message.unacked += 1
            message.next_offset = end
            if last:
                message.segmented = True
                message.last_psn = psn
                pending.popleft()
            psn = (psn + 1) & PSN_MASK
            bytes_in_flight += length
            sent_bytes += length
            out.append(rec)
            count += 1
            if paced:
                cc.on_sent(now, length)
        if out:
            if was_idle:
                self._last_progress = now
            # The burst's PSNs are consecutive: their outstanding bits are set in one go.
            first = out[0].psn
            if not outstanding:
                una = first
            outstanding |= ((1 << count) - 1) << ((first - una) & PSN_MASK)
            self._next_psn = psn
            self._una = una
            self._outstanding = outstanding
            self._order = order
            self.bytes_in_flight = bytes_in_flight
            self._last_send = now
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
        return self._build(rec, retransmit=rec.transmissions > 1), rec.entry

    def take_outbox(self) -> list[tuple[DataPacket | ReliabilityProbe, EvEntry]]:
        """Probes and completion re-sends the timers produced, to go out now."""
        out, self._outbox = self._outbox, []
        return out

    def _transmit(self, rec: SentPacket, entry: EvEntry, now: float) -> None:
        if not self._in_flight:
            self._last_progress = now
        if rec.transmissions:
            if rec.earlier_copies is None:
                rec.earlier_copies = []
            rec.earlier_copies.append((rec.ts16, rec.sent_time))
        rec.entry = entry
        rec.sent_time = now
        rec.ts16 = int(now * _US) & 0xFFFF
        self._order += 1
        rec.order = self._order
        rec.transmissions += 1
        rec.in_flight = True
        self._in_flight[rec.psn] = rec
        self.bytes_in_flight += rec.length
        self._last_send = now
        counters = self._counters
        counters.data_packets_sent += 1
        counters.data_bytes_sent += rec.length
        if self._paced:
            self.cc.on_sent(now, rec.length)

    def _build(self, rec: SentPacket, retransmit: bool) -> DataPacket:
        message = rec.message
        opcode = rec.opcode
        immediate = message.immediate if opcode in _IMM_OPCODE_SET else None
        offset = rec.offset
        end = offset + rec.length
        # Positional: this runs for every packet sent, and keyword calls cost more.
        return DataPacket(
            opcode,
            self._remote_qp,
            rec.psn,
            message.msn,
            self._rqmsn(),
            message.remote_va + offset,
            message.rkey,
            message.length,
            bytes(message.data[offset:end]),
            immediate,
            rec.ts16,
            0,
            end >= message.length,
            retransmit,
        )

    def _rqmsn(self) -> int:
        """Oldest unconfirmed MSN (the receiver may forget outcomes of older messages)."""
        for msn in self._unconfirmed:
            return msn
        return self._next_msn

    @property
    def rqmsn(self) -> int:
        """The RQMSN data packets carry now: the oldest unconfirmed MSN."""
        return self._rqmsn()

    # --- feedback -------------------------------------------------------------------------

    def on_sack(self, sack: SackPacket, now: float) -> DropReason | None:
        """Process a SACK; returns a drop reason if it cannot be ours."""
        cack = sack.cack_psn
        if psn_diff(cack, self._next_psn) > 0:
            return DropReason.UNEXPECTED
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
        records = self._records
        # The RTT sample first: confirmations scheduled while acknowledging use the RTO, and a
        # coalesced SACK may acknowledge a whole message together with its first sample.
        answered: SentPacket | None = None
        rtt_sample: float | None = None
        index = psn_diff(answered_psn, una)
        if not sack.probe_response and index >= 0 and (newly >> index) & 1:
            answered = records[answered_psn]
            rtt_sample = _rtt_sample(answered, sack.echoed_timestamp, now)
            if rtt_sample is not None:
                self._rtt.update(rtt_sample)
                if answered.lost_cause is _SACK_GAP and (
                    not answered.in_flight or sack.echoed_timestamp != answered.ts16
                ):
                    # The copy declared lost is answered: the latest one while the resend
                    # waits (not in flight), an earlier one once the resend went out.
                    self._on_spurious_loss(answered_psn, answered.order)
        elif self._disputed and not sack.probe_response:
            disputed = self._disputed.pop(answered_psn, None)
            if disputed is not None and disputed[0] == sack.echoed_timestamp:
                self._on_spurious_loss(answered_psn, disputed[1])
        acked_bytes = 0
        rack = self._rack_order
        if newly:
            self._outstanding &= ~newly
            acked_bytes, rack = self._acknowledge_all(newly, una, answered, rack, now)
            self._advance_una()
        if sack.probe_response:
            if self._probe_outstanding and answered_psn == self._probe_psn:
                self._probe_outstanding = False
                rack = max(rack, self._probe_order)
        elif answered is not None:
            entry = answered.entry
            # A copy an RTO sent is loss evidence for the packets sent before it only if the RTO
            # was real: under a queue that grows faster than srtt follows, the RTO fires early,
            # originals keep being acknowledged, and the answer to its copy declared the whole
            # queued flight lost (and retired its EVs). After an outage nothing original is.
            evidence = answered.transmissions == 1 or (
                rtt_sample is not None
                and (answered.lost_cause is not _TIMEOUT or not self._last_rto_spurious)
            )
            if evidence and answered.order > rack:
                rack = answered.order
                if rtt_sample is not None:
                    self._rack_rtt = rtt_sample
            if entry is not None:
                if sack.skip_mode == _SKIP_ONCE:
                    self._ev_set.skip(entry)
                elif sack.skip_mode == _ALWAYS_SKIP:
                    self._ev_set.retire(entry, now)
        self._rack_order = rack
        ecn = sack.ecn_echo
        if ecn:
            self._counters.ecn_echoes += 1
        if acked_bytes or ecn:
            self.cc.on_ack(now, acked_bytes, rtt_sample, self._rtt.min_rtt, ecn)
        if acked_bytes:
            if self._rto_victim is not None and self._rto_victim.acked:
                self._judge_timeout(now)
            self._progress(now)
        self._last_ack_time = now
        self._detect_losses(now)
        return None

    def _judge_timeout(self, now: float) -> None:
        """The latest RTO's packet is acknowledged: was it its original that arrived?"""
        victim = self._rto_victim
        assert victim is not None
        self._rto_victim = None
        min_rtt = self._rtt.min_rtt
        original = victim.transmissions == 1 or (
            min_rtt is not None and now - victim.sent_time < min_rtt
        )
        if original:
            self._counters.spurious_timeouts += 1
            self.cc.on_spurious_timeout(now)

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
        self._declare_lost(rec, RetransmitCause.NACK, now, front=True)
        if not last_hop and rec.entry is not None:
            self._ev_set.skip(rec.entry)
        self.cc.on_trim(now, last_hop, self._rtt.min_rtt)
        self._last_ack_time = now
        return None

    def on_ack(self, ack: AckPacket, now: float) -> DropReason | None:
        """Process the receiver's completion report (ACK or NAK) for one message."""
        cumulative = ack.psn
        if psn_diff(cumulative, self._next_psn) > 0 or ack.msn > MSN_MASK:
            return DropReason.UNEXPECTED
        message = self._unconfirmed.get(ack.msn)
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
            self._finish(message, ack.syndrome)
        if acked_bytes:
            self._progress(now)
        self._last_ack_time = now
        return None

    def _acknowledge_all(
        self, newly: int, una: int, answered: SentPacket | None, rack: int, now: float
    ) -> tuple[int, int]:
        """Acknowledge every PSN whose bit (relative to ``una``) is set in ``newly``, as
        ``_acknowledge`` does one by one; returns the bytes acknowledged and the RACK order
        advanced over first transmissions other than ``answered``. Inlined because a
        coalesced SACK acknowledges up to 64 packets and this runs for every packet sent."""
        records = self._records
        in_flight = self._in_flight
        offer = self._ev_set.offer
        acked_bytes = 0
        in_flight_bytes = 0
        count = 0
        spurious = False
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
                            offer(entry)
                acked_bytes += length
                message = rec.message
                message.unacked -= 1
                if message.unacked == 0 and message.segmented and not message.done:
                    self._schedule_confirmation(message, now)
                if rec.transmissions == 1:
                    spurious = True
                    if rec.order > rack and rec is not answered:
                        rack = rec.order
                elif rec.lost_cause is _SACK_GAP:
                    self._dispute(rec)
            count += run
            base += run
        if spurious:
            self._last_rto_spurious = True
        self.bytes_in_flight -= in_flight_bytes
        counters = self._counters
        counters.packets_acked += count
        counters.bytes_acked += acked_bytes
        return acked_bytes, rack

    def _acknowledge(self, rec: SentPacket, now: float) -> int:
        rec.acked = True
        if rec.transmissions == 1:
            self._last_rto_spurious = True
        elif rec.lost_cause is _SACK_GAP:
            self._dispute(rec)
        if rec.in_flight:
            rec.in_flight = False
            del self._in_flight[rec.psn]
            self.bytes_in_flight -= rec.length
            if rec.entry is not None:
                self._ev_set.release(rec.entry)
        counters = self._counters
        counters.packets_acked += 1
        counters.bytes_acked += rec.length
        message = rec.message
        message.unacked -= 1
        if message.unacked == 0 and message.segmented and not message.done:
            self._schedule_confirmation(message, now)
        return rec.length

    def _dispute(self, rec: SentPacket) -> None:
        """Remember a resent SACK-gap loss acknowledged before its original could answer."""
        copies = rec.earlier_copies
        if not copies:
            return
        _remember(self._disputed, rec.psn, (copies[-1][0], rec.order))

    def _progress(self, now: float) -> None:
        self._last_progress = now
        self._backoff = 0
        self._probe_outstanding = False

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

    def _finish(self, message: OutboundMessage, syndrome: int) -> None:
        message.done = True
        self._unconfirmed.pop(message.msn, None)
        if syndrome == AethSyndrome.ACK:
            self._counters.messages_acked += 1
            self._events.append(MessageAcked(self._qp, message.msn, message.length))
        else:
            self._counters.messages_failed += 1
            try:
                name = AethSyndrome(syndrome).name
            except ValueError:
                name = f"syndrome {syndrome:#04x}"
            self._events.append(
                MessageFailed(self._qp, message.msn, f"receiver refused the write ({name})")
            )

    # --- loss detection -------------------------------------------------------------------

    def _on_spurious_loss(self, psn: int, order: int) -> None:
        """A loss declared from a SACK gap (packet ``psn``) was reordering: the EV it retired
        comes back, and the reordering window widens by one base width, unless the packet
        (``order``) was sent before the last widening, whose flight has already widened it."""
        self._counters.spurious_losses += 1
        retired = self._retired_by.pop(psn, None)
        if retired is not None and self._ev_set.reinstate(retired[0], retired[1]):
            self._counters.evs_reinstated += 1
        if order <= self._reorder_widened_at_order:
            return
        self._reorder_mult += 1
        self._reorder_widened_at_order = self._order
        self._loss_episodes_since_widening = 0

    @property
    def reorder_multiplier(self) -> int:
        """The reordering window in base widths (1 until a spurious loss is seen)."""
        return self._reorder_mult

    def _detect_losses(self, now: float) -> None:
        self._loss_deadline = None
        if not self._config.sack_loss_detection:
            return
        rack = self._rack_order
        mult = self._reorder_mult
        rtt = self._rtt
        delay = max(rtt.loss_delay(mult), self._rack_rtt + rtt.reorder_window(mult))
        lost: list[SentPacket] = []
        for rec in self._in_flight.values():
            if rec.order >= rack:
                break
            deadline = rec.sent_time + delay
            if now >= deadline:
                lost.append(rec)
            else:
                self._loss_deadline = deadline
                break
        if not lost:
            return
        for rec in lost:
            self._declare_lost(rec, RetransmitCause.SACK_GAP, now, front=False)
        if mult > 1:
            self._loss_episodes_since_widening += 1
            if self._loss_episodes_since_widening >= self._config.reorder_window_persist:
                self._reorder_mult = 1
                self._loss_episodes_since_widening = 0

    def _declare_lost(
        self, rec: SentPacket, cause: RetransmitCause, now: float, front: bool
    ) -> None:
        del self._in_flight[rec.psn]
        rec.in_flight = False
        self.bytes_in_flight -= rec.length
        if rec.entry is not None:
            self._ev_set.release(rec.entry)
        rec.lost_cause = cause
        self._counters.losses[cause] += 1
        if front:
            self._retx.appendleft(rec)
        else:
            self._retx.append(rec)
        entry = rec.entry
        if cause is not _NACK and entry is not None:
            retired = self._ev_set.retire(entry, now)
            if retired and cause is _SACK_GAP and entry.home:
                _remember(self._retired_by, rec.psn, (entry, entry.loss_reports))

    # --- timers ---------------------------------------------------------------------------

    def _rto_deadline(self) -> float | None:
        if not self._in_flight:
            return None
        return self._last_progress + self._rtt.rto(self._backoff)

    def _tail_probe_deadline(self) -> float | None:
        srtt = self._rtt.srtt
        if (
            srtt is None
            or not self._config.tail_loss_probe
            or not self._in_flight
            or self._probe_outstanding
            or self._retx
        ):
            return None
        return max(self._last_ack_time, self._last_send) + 2 * srtt

    def next_timer(self) -> float | None:
        """The earliest time ``on_timer`` has work, or None."""
        candidates = [
            t
            for t in (self._loss_deadline, self._rto_deadline(), self._tail_probe_deadline())
            if t is not None
        ]
        if self._confirm_heap:
            candidates.append(self._confirm_heap[0][0])
        return min(candidates) if candidates else None

    def on_timer(self, now: float) -> None:
        """Run whatever timers are due at ``now``."""
        if self._loss_deadline is not None and now >= self._loss_deadline:
            self._detect_losses(now)
        rto = self._rto_deadline()
        if rto is not None and now >= rto:
            self._on_rto(now)
        tail = self._tail_probe_deadline()
        if tail is not None and now >= tail:
            self._send_tail_probe()
        while self._confirm_heap and self._confirm_heap[0][0] <= now:
            _deadline, _seq, msn, attempt = heapq.heappop(self._confirm_heap)
            message = self._unconfirmed.get(msn)
            if message is None or message.confirm_attempts != attempt or message.unacked:
                continue
            self._resend_completion(message, now)

    def _on_rto(self, now: float) -> None:
        self._counters.timeouts += 1
        oldest = next(iter(self._in_flight.values()))
        self._declare_lost(oldest, RetransmitCause.TIMEOUT, now, front=True)
        self._rto_resend = oldest
        self._rto_victim = oldest
        self._early_resend_allowed = True
        self._last_rto_spurious = self._rtt.srtt is None
        self._backoff += 1
        self._probe_outstanding = False
        self._last_progress = now
        self.cc.on_timeout(now)

    def on_path_answered(self, now: float) -> None:
        """An EV probe was answered: some path reaches the peer. While timeouts back off with
        nothing acknowledged (an outage), resend the oldest packet now instead of at the next
        backed-off RTO, so data resumes within a probe's round trip of a repair; its answer
        then lets loss detection find the rest of the lost flight."""
        if (
            self._early_resend_allowed
            and self._backoff
            and self._in_flight
            and self._rto_resend is None
        ):
            self._early_resend_allowed = False
            oldest = next(iter(self._in_flight.values()))
            self._declare_lost(oldest, RetransmitCause.TIMEOUT, now, front=True)
            self._rto_resend = oldest
            self._last_progress = now

    def _send_tail_probe(self) -> None:
        self._probe_outstanding = True
        entry = self._ev_set.next_for_control()
        if entry is None:
            return  # no usable EV: leave the tail to the RTO
        self._probe_psn = next(reversed(self._in_flight))
        self._order += 1
        self._probe_order = self._order
        self._counters.tail_probes += 1
        self._outbox.append((ReliabilityProbe(self._remote_qp, self._probe_psn), entry))

    def _schedule_confirmation(self, message: OutboundMessage, now: float) -> None:
        deadline = now + self._rtt.rto(message.confirm_attempts)
        self._confirm_seq += 1
        heapq.heappush(
            self._confirm_heap,
            (deadline, self._confirm_seq, message.msn, message.confirm_attempts),
        )

    def _resend_completion(self, message: OutboundMessage, now: float) -> None:
        """The receiver's ACK is overdue: resend the message's last packet to ask again."""
        message.confirm_attempts += 1
        entry = self._ev_set.next_for_control()
        if entry is not None:
            length = message.length
            offset = ((length - 1) // self._mss) * self._mss if length else 0
            rec = SentPacket(
                message.last_psn,
                message,
                offset,
                length - offset,
                _opcode(offset == 0, True, message.immediate is not None),
            )
            rec.ts16 = int(now * _US) & 0xFFFF
            self._counters.completion_probes += 1
            self._outbox.append((self._build(rec, retransmit=True), entry))
        self._schedule_confirmation(message, now)

    # --- teardown -------------------------------------------------------------------------

    def fail_all(self, reason: str) -> None:
        """The connection died: every unconfirmed message fails with ``reason``."""
        for message in list(self._unconfirmed.values()):
            message.done = True
            self._counters.messages_failed += 1
            self._events.append(MessageFailed(self._qp, message.msn, reason))
        self._unconfirmed.clear()
        self._pending.clear()
        self._records.clear()
        self._outstanding = 0
        self._una = self._next_psn
        self._in_flight.clear()
        self._retx.clear()
        self._rto_resend = None
        self._confirm_heap.clear()
        self.bytes_in_flight = 0
        self._loss_deadline = None
