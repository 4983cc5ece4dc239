"""Loss recovery on the sending side: what is in flight, what is lost, and what to resend.

Reliability, in the order a packet meets it:

* SACKs acknowledge cumulatively and by bitmap. RACK-style loss detection: a packet is lost
  once a packet *sent after it* has been acknowledged and it is older than
  ``srtt + reorder window`` (the window absorbs the spread of path delays). A lost packet's EV
  is retired at once (a silent loss means a broken path) and the packet is resent on another.
* Disputes: if the original of a packet declared lost from a SACK gap is answered after all,
  the loss was reordering; the window widens and the EV gets its slot back.
* A NACK for a trimmed packet (matched to its latest copy by the echoed timestamp) resends it
  at the head of the queue, without waiting for anything; its EV is merely skipped once.
* A reliability probe (0xDE) is sent when the tail of a flight goes unanswered for two smoothed
  RTTs; its SACK gives loss detection the later-sent evidence a tail lacks.
* The RTO is the last resort: nothing acknowledged for an RTO declares the *oldest* packet in
  flight lost, retires its EV alone, resends it on the next EV of the slot rotation (not the
  answered-EV list, which a timeout has made stale: ``EvSet.next_after_timeout``) and backs off
  exponentially until progress resumes. A timeout says "nothing came back", which a queue
  holding seconds of packets says as well as a dead path: resending the whole flight multiplied
  the load of an already congested path, and retiring every EV in flight emptied the set on one
  spurious timeout. If the head was really lost, the answer to its copy gives loss detection the
  later-sent evidence for the rest. A timeout found spurious afterwards is undone (the
  controller's reduction is reverted).
* Every copy's timestamp is kept, so an answer to an earlier copy (a spurious retransmission)
  is still an RTT sample: matching only the latest copy took no sample at all once the RTO was
  below the RTT, and the RTO then never grew to it.

The ``Sender`` (``agent.core.sender``) owns the PSN space and feeds this module what is sent
and answered; its per-packet loops update ``in_flight`` and ``bytes_in_flight`` in place.
Time is float seconds, passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from typing import Final, TypeVar

from agent.core.cc.base import CongestionControl
from agent.core.config import MrcConfig
from agent.core.ev import EvEntry, EvSet
from agent.core.messages import SentPacket
from agent.core.packets import DataPacket, ReliabilityProbe
from agent.core.rtt import RttEstimator
from agent.core.stats import ConnectionCounters, RetransmitCause

_US: Final = 1_000_000
#: Enum members as module constants: they are read for every packet or SACK, and an enum
#: attribute access is slow.
_SACK_GAP: Final = RetransmitCause.SACK_GAP
_TIMEOUT: Final = RetransmitCause.TIMEOUT
_NACK: Final = RetransmitCause.NACK
#: Resent SACK-gap losses remembered for a late original to disprove (see ``disputed``).
_DISPUTED_MAX: Final = 1024
_V = TypeVar("_V")


def rtt_sample(rec: SentPacket, echoed_ts16: int, now: float) -> float | None:
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


class Recovery:
    """Loss detection, disputes, RTO and tail probes of one connection's sending half."""

    def __init__(
        self,
        config: MrcConfig,
        remote_qp: int,
        ev_set: EvSet,
        cc: CongestionControl,
        rtt: RttEstimator,
        counters: ConnectionCounters,
    ) -> None:
        self._config = config
        self._remote_qp = remote_qp
        self._ev_set = ev_set
        self._cc = cc
        self._rtt = rtt
        self._counters = counters
        #: Whether the controller paces (wants ``on_sent``); window-only ones skip the call.
        self._paced = cc.paced
        #: Packets in flight by PSN, in the order they were (last) sent.
        self.in_flight: dict[int, SentPacket] = {}
        self.bytes_in_flight = 0
        #: Packets declared lost, to resend (``next_retransmission``), NACKed ones first.
        self.retx: deque[SentPacket] = deque()
        #: Send order of the latest transmission (first sends, resends and tail probes alike):
        #: the clock RACK compares packets by.
        self.order = 0
        self.rack_order = 0
        #: RTT of the latest answered packet that moved the RACK order (RFC 8985's RACK.rtt):
        #: a packet sent before it is lost only once older than that RTT plus the reordering
        #: window. srtt alone lags a queue that grows by seconds, and declared lost packets
        #: that were only queued behind the ones answered.
        self._rack_rtt = 0.0
        #: RFC 8985's reo_wnd_mult: the reordering window in base widths. A SACK-gap loss
        #: disproved by the answer to the copy declared lost adds one, at most once per flight
        #: (a packet sent after the last widening must be the one disproved);
        #: ``reorder_window_persist`` loss episodes without another bring it back to 1.
        self.reorder_mult = 1
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
        self.loss_deadline: float | None = None
        #: Consecutive timeouts without progress (the RTO's backoff exponent).
        self.backoff = 0
        #: The packet an RTO resends: it goes out whatever the window says, as TCP's RTO
        #: retransmission does, or a flight lost whole (an outage) would hold it back forever.
        self._rto_resend: SentPacket | None = None
        #: The packet the latest RTO declared lost, until its fate is known: acknowledged
        #: sooner after its resend than any round trip takes (or before the resend left), the
        #: answer was to the original, the RTO was spurious, and the controller's timeout
        #: reduction is undone (RFC 4015's Eifel response).
        self._rto_victim: SentPacket | None = None
        #: The send order when the latest RTO fired, until that timeout is found spurious: a
        #: first transmission sent by then and acknowledged after it proves the flight was
        #: late, not lost (RFC 5682's F-RTO test), and the controller's cut is undone. The
        #: victim's own answer rarely tells: the resend leaves at once, and the original's
        #: answer, however late, comes later than any round trip after it.
        self._rto_order: int | None = None
        #: An answered EV probe may bring the next resend forward once per timeout, not once
        #: per answer: probes keep being answered through a long queue, and each answer
        #: resending a packet would add load to exactly the path that is slow.
        self._early_resend_allowed = False
        #: Whether the last RTO looks spurious: a first transmission was acknowledged since
        #: (the flight was queued, not lost: F-RTO's test), or it fired before any RTT sample
        #: (``rto_initial`` is a guess, and a copy it sends on an emptier path overtakes
        #: originals that are only queued).
        self.last_rto_spurious = False
        self.last_progress = 0.0
        self._last_ack_time = 0.0
        self.last_send = 0.0
        self._probe_outstanding = False
        self._probe_psn = 0
        self._probe_order = 0

    # --- sending --------------------------------------------------------------------------

    def next_retransmission(self, now: float, window: int) -> SentPacket | None:
        """The packet to resend now, accounted as sent on its new EV; None when there is none
        or the head of the queue must wait (``retx`` then still holds it) for the window or
        for a usable EV."""
        retx = self.retx
        while retx:
            rec = retx[0]
            if rec.acked or rec.in_flight:
                retx.popleft()
                continue
            exempt = rec is self._rto_resend
            if not exempt and self.bytes_in_flight and self.bytes_in_flight + rec.length > window:
                return None
            ev_set = self._ev_set
            entry = ev_set.next_after_timeout() if exempt else ev_set.next_for_data()
            if entry is None:
                return None
            retx.popleft()
            if exempt:
                self._rto_resend = None
            self._counters.retransmits[rec.lost_cause] += 1
            self._resend(rec, entry, now)
            return rec
        return None

    def _resend(self, rec: SentPacket, entry: EvEntry, now: float) -> None:
        if not self.in_flight:
            self.last_progress = now
        if rec.transmissions:
            if rec.earlier_copies is None:
                rec.earlier_copies = []
            rec.earlier_copies.append((rec.ts16, rec.sent_time))
        rec.entry = entry
        rec.sent_time = now
        rec.ts16 = int(now * _US) & 0xFFFF
        self.order += 1
        rec.order = self.order
        rec.transmissions += 1
        rec.in_flight = True
        self.in_flight[rec.psn] = rec
        self.bytes_in_flight += rec.length
        self.last_send = now
        counters = self._counters
        counters.data_packets_sent += 1
        counters.data_bytes_sent += rec.length
        if self._paced:
            self._cc.on_sent(now, rec.length)

    def on_sent(self, now: float, was_idle: bool, order: int, sent_bytes: int) -> None:
        """First transmissions up to send order ``order`` left at ``now`` (the sender put them
        in ``in_flight``); ``was_idle``: nothing was in flight before them."""
        if was_idle:
            self.last_progress = now
        self.order = order
        self.bytes_in_flight += sent_bytes
        self.last_send = now

    # --- answers --------------------------------------------------------------------------

    def sample(self, answered: SentPacket, echoed_ts16: int, now: float) -> float | None:
        """The RTT sample of the copy of ``answered`` a SACK echoed, fed to the estimator; a
        SACK-gap loss whose declared-lost copy is the one answered is disproved."""
        sample = rtt_sample(answered, echoed_ts16, now)
        if sample is not None:
            self._rtt.update(sample)
            if answered.lost_cause is _SACK_GAP and (
                not answered.in_flight or echoed_ts16 != answered.ts16
            ):
                # The copy declared lost is answered: the latest one while the resend
                # waits (not in flight), an earlier one once the resend went out.
                self._on_spurious_loss(answered.psn, answered.order)
        return sample

    def late_answer(self, psn: int, echoed_ts16: int) -> None:
        """A SACK answers ``psn``, no longer outstanding: if it echoes the copy a disputed
        loss declared lost, the loss was spurious."""
        if not self._disputed:
            return
        disputed = self._disputed.pop(psn, None)
        if disputed is not None and disputed[0] == echoed_ts16:
            self._on_spurious_loss(psn, disputed[1])

    def originals_acknowledged(self, order: int, now: float) -> None:
        """First transmissions were acknowledged, the oldest of them sent at send order
        ``order``: the flight was queued, not lost (F-RTO); sent before the latest RTO, it
        proves that timeout spurious."""
        self.last_rto_spurious = True
        rto_order = self._rto_order
        if rto_order is not None and order <= rto_order:
            self._spurious_timeout(now)

    def _spurious_timeout(self, now: float) -> None:
        """The latest RTO was spurious: count it once and undo the controller's cut."""
        self._rto_order = None
        self._rto_victim = None
        self._counters.spurious_timeouts += 1
        self._cc.on_spurious_timeout(now)

    def dispute(self, rec: SentPacket) -> None:
        """Remember a resent SACK-gap loss acknowledged before its original could answer."""
        copies = rec.earlier_copies
        if not copies:
            return
        _remember(self._disputed, rec.psn, (copies[-1][0], rec.order))

    def acknowledged(self, rec: SentPacket, now: float) -> None:
        """``rec`` (marked acked) is out of flight: the single-packet form of what the
        sender's SACK loop does inline."""
        if rec.transmissions == 1:
            self.originals_acknowledged(rec.order, now)
        elif rec.lost_cause is _SACK_GAP:
            self.dispute(rec)
        if rec.in_flight:
            rec.in_flight = False
            del self.in_flight[rec.psn]
            self.bytes_in_flight -= rec.length
            if rec.entry is not None:
                self._ev_set.release(rec.entry)

    def probe_answered(self, psn: int, rack: int) -> int:
        """A SACK answered a reliability probe for ``psn``: the RACK order it moves to."""
        if self._probe_outstanding and psn == self._probe_psn:
            self._probe_outstanding = False
            rack = max(rack, self._probe_order)
        return rack

    def rack_evidence(self, answered: SentPacket, sample: float | None, rack: int) -> int:
        """The RACK order after ``answered`` (with RTT ``sample``) was answered."""
        # A copy an RTO sent is loss evidence for the packets sent before it only if the RTO
        # was real: under a queue that grows faster than srtt follows, the RTO fires early,
        # originals keep being acknowledged, and the answer to its copy declared the whole
        # queued flight lost (and retired its EVs). After an outage nothing original is.
        evidence = answered.transmissions == 1 or (
            sample is not None
            and (answered.lost_cause is not _TIMEOUT or not self.last_rto_spurious)
        )
        if evidence and answered.order > rack:
            rack = answered.order
            if sample is not None:
                self._rack_rtt = sample
        return rack

    def judge_timeout(self, now: float) -> None:
        """Data was acknowledged: if the latest RTO's packet is among it, was it its original
        that arrived? Then the timeout was spurious and the controller undoes its cut."""
        victim = self._rto_victim
        if victim is None or not victim.acked:
            return
        self._rto_victim = None
        min_rtt = self._rtt.min_rtt
        original = victim.transmissions == 1 or (
            min_rtt is not None and now - victim.sent_time < min_rtt
        )
        if original:
            self._spurious_timeout(now)

    def progress(self, now: float) -> None:
        """Data was acknowledged: the RTO starts over without backoff."""
        self.last_progress = now
        self.backoff = 0
        self._probe_outstanding = False

    def heard(self, now: float) -> None:
        """Feedback (SACK, NACK, ACK) arrived: the tail probe waits from here."""
        self._last_ack_time = now

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
        self.reorder_mult += 1
        self._reorder_widened_at_order = self.order
        self._loss_episodes_since_widening = 0

    def detect_losses(self, now: float) -> None:
        """Declare lost every packet sent before the latest answered one and older than the
        loss delay; set ``loss_deadline`` for the next that may become so."""
        self.loss_deadline = None
        if not self._config.sack_loss_detection:
            return
        rack = self.rack_order
        mult = self.reorder_mult
        rtt = self._rtt
        delay = max(rtt.loss_delay(mult), self._rack_rtt + rtt.reorder_window(mult))
        lost: list[SentPacket] = []
        for rec in self.in_flight.values():
            if rec.order >= rack:
                break
            deadline = rec.sent_time + delay
            if now >= deadline:
                lost.append(rec)
            else:
                self.loss_deadline = deadline
                break
        if not lost:
            return
        for rec in lost:
            self.declare_lost(rec, RetransmitCause.SACK_GAP, now, front=False)
        if mult > 1:
            self._loss_episodes_since_widening += 1
            if self._loss_episodes_since_widening >= self._config.reorder_window_persist:
                self.reorder_mult = 1
                self._loss_episodes_since_widening = 0

    def declare_lost(
        self, rec: SentPacket, cause: RetransmitCause, now: float, front: bool
    ) -> None:
        """``rec`` (in flight) is lost for ``cause``: queue its resend (at the head with
        ``front``) and, unless a trim says the path works, retire its EV."""
        del self.in_flight[rec.psn]
        rec.in_flight = False
        self.bytes_in_flight -= rec.length
        if rec.entry is not None:
            self._ev_set.release(rec.entry)
        rec.lost_cause = cause
        self._counters.losses[cause] += 1
        if front:
            self.retx.appendleft(rec)
        else:
            self.retx.append(rec)
        entry = rec.entry
        if cause is not _NACK and entry is not None:
            retired = self._ev_set.retire(entry, now)
            if retired and cause is _SACK_GAP and entry.home:
                _remember(self._retired_by, rec.psn, (entry, entry.loss_reports))

    # --- timers ---------------------------------------------------------------------------

    def _rto_deadline(self) -> float | None:
        if not self.in_flight:
            return None
        return self.last_progress + self._rtt.rto(self.backoff)

    def _tail_probe_deadline(self) -> float | None:
        srtt = self._rtt.srtt
        if (
            srtt is None
            or not self._config.tail_loss_probe
            or not self.in_flight
            or self._probe_outstanding
            or self.retx
        ):
            return None
        return max(self._last_ack_time, self.last_send) + 2 * srtt

    def next_timer(self) -> float | None:
        """The earliest time ``on_timer`` has work, or None."""
        candidates = [
            t
            for t in (self.loss_deadline, self._rto_deadline(), self._tail_probe_deadline())
            if t is not None
        ]
        return min(candidates) if candidates else None

    def on_timer(
        self, now: float, outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]]
    ) -> None:
        """Run whatever of loss detection, RTO and tail probe is due at ``now`` (a probe goes
        to ``outbox``)."""
        if self.loss_deadline is not None and now >= self.loss_deadline:
            self.detect_losses(now)
        rto = self._rto_deadline()
        if rto is not None and now >= rto:
            self._on_rto(now)
        tail = self._tail_probe_deadline()
        if tail is not None and now >= tail:
            self._send_tail_probe(outbox)

    def _on_rto(self, now: float) -> None:
        self._counters.timeouts += 1
        oldest = next(iter(self.in_flight.values()))
        self.declare_lost(oldest, RetransmitCause.TIMEOUT, now, front=True)
        self._rto_resend = oldest
        self._rto_victim = oldest
        self._rto_order = self.order
        self._early_resend_allowed = True
        self.last_rto_spurious = self._rtt.srtt is None
        # One cut per run of timeouts without progress: the backed-off ones say nothing new
        # (no window is used while nothing comes back), and a run found spurious gives back
        # the window it had before its first timeout.
        if not self.backoff:
            self._cc.on_timeout(now)
        self.backoff += 1
        self._probe_outstanding = False
        self.last_progress = now

    def on_path_answered(self, now: float) -> None:
        """An EV probe was answered: some path reaches the peer. While timeouts back off with
        nothing acknowledged (an outage), resend the oldest packet now instead of at the next
        backed-off RTO, so data resumes within a probe's round trip of a repair; its answer
        then lets loss detection find the rest of the lost flight."""
        if (
            self._early_resend_allowed
            and self.backoff
            and self.in_flight
            and self._rto_resend is None
        ):
            self._early_resend_allowed = False
            oldest = next(iter(self.in_flight.values()))
            self.declare_lost(oldest, RetransmitCause.TIMEOUT, now, front=True)
            self._rto_resend = oldest
            self.last_progress = now

    def _send_tail_probe(self, outbox: list[tuple[DataPacket | ReliabilityProbe, EvEntry]]) -> None:
        self._probe_outstanding = True
        entry = self._ev_set.next_for_control()
        if entry is None:
            return  # no usable EV: leave the tail to the RTO
        self._probe_psn = next(reversed(self.in_flight))
        self.order += 1
        self._probe_order = self.order
        self._counters.tail_probes += 1
        outbox.append((ReliabilityProbe(self._remote_qp, self._probe_psn), entry))

    # --- teardown -------------------------------------------------------------------------

    def clear(self) -> None:
        """The connection died: nothing is in flight or to be resent any more."""
        self.in_flight.clear()
        self.retx.clear()
        self._rto_resend = None
        self.bytes_in_flight = 0
        self.loss_deadline = None
