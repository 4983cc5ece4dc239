"""A connection's entropy values (EVs): the set it sprays over, and the health of each EV.

Each EV is a path through the fabric (ECMP hashes it), so this module is where MRC steers:

* The set has ``ev_set_size`` *slots*, split evenly across planes (slot i on plane
  i mod planes). Data goes round-robin over the slots, a different EV for every packet.
* States (``EvState``): GOOD carries data; SKIP is passed over once by the rotation, then GOOD
  again (after an ECN echo or a non-last-hop trim: the path is loaded, not broken);
  ASSUMED_BAD carries no data and is probed in the background (after a silent loss or a
  timeout: the path may be broken); DENIED is set by the operator and never used or probed.
* A slot remembers its *home* EV. When the home EV is retired (ASSUMED_BAD or DENIED) a fresh
  EV of the same plane, a *stand-in*, takes the slot so the set keeps its size. The retired home
  EV is probed in rounds every ``probe_interval``; after ``probes_to_revive`` consecutive answered
  probes it takes its slot back and the stand-in is dropped. A repaired path therefore returns
  with the EVs that used to reach it. Retired EVs with no answered probe yet share a budget of
  ``probe_share`` probes per data packet sent, round robin: a dead path can hold a quarter of
  the set, and probing each of them every interval sent more probes than data.
* A stand-in first proves itself with ``probes_to_admit`` answered probes (the testbed's choice,
  see ``MrcConfig.probes_to_admit``): while a path is dead, a random fresh EV has the same chance
  of hashing onto it as the one it replaces, and an unproven EV would lose data again. A
  stand-in that fails a probe, or later loses a packet, is discarded and a new one drawn; one
  drawn after a failed probe waits for the probe budget (above), so that a dead plane or
  fabric does not draw and probe a fresh EV for every slot at every probe timeout.
* A loss the sender later sees disproved (the packet was late, not lost: reordering, not a
  broken path) gives the home EV it retired its slot back at once, without probes, provided
  no other loss was reported on it meanwhile (``reinstate``).
* A plane can be unusable (the local port or the peer's port is down): its slots are skipped,
  and a loss on it retires no EV (the port is at fault, not the path).
* Ack-clocked choice (the testbed's refinement of the rotation): data prefers an EV whose
  previous packet has been answered, taken from a free list refilled in the order answers
  arrive; only when every usable EV has a packet outstanding does the plain round robin
  decide. An EV whose last packet is unanswered is slow or broken: not reusing it until it
  answers keeps new data off a dead path from its first loss on, before any timer fires, and
  shifts load from slow paths to fast ones. Every packet still gets a different EV whenever
  the set is larger than the window, as MRC asks. A timeout's resend is the exception: it
  takes the rotation, since the list went stale when the answers stopped.

EV values are 32 bits carried as ``wire.entropy`` maps them: a UDP source port (drawn from the
configured entropy port range) and, over IPv6 only, a random flow label.

A set may instead be given its EVs (an explicit or generated EV profile of the host API, see
``agent.core.ev_expansion``): then each listed EV is a slot's home for good, no stand-in is
ever drawn (a profile's EVs name paths; a random one names none), a retired EV's slot stays
empty until probes revive it, and no EV is retired while only ``min_active`` EVs could carry
data: below that floor the set keeps using what it has rather than starve. The agent's own
exact-path EVs (structured EV and SRv6 modes, ``agent.io.structured_evs``) are given too, with
one exception (``standin_when_starved``): when the last of them that could carry data is
retired, a random stand-in takes its slot, so that a connection of one EV, whose only path
died, finds another as hashing would instead of waiting for the repair.

Every change of a home EV's state (retired, revived or reinstated, denied, allowed) goes out
as an ``EvStateChanged`` event when the set is given an event queue: the host API's EV events.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Final

from agent.core.config import MrcConfig
from agent.core.events import Event, EvStateChanged
from agent.core.stats import EvReport
from wire.constants import EvState
from wire.entropy import ev_from_headers

_GOOD: Final = EvState.GOOD
_SKIP: Final = EvState.SKIP
_BAD: Final = EvState.ASSUMED_BAD
_DENIED: Final = EvState.DENIED


class EvEntry:
    """One EV and its health. Sent-packet records keep a reference, so feedback about a packet
    (SACK, NACK, loss) reaches the exact EV it travelled on."""

    __slots__ = (
        "ecn_echoes",
        "home",
        "loss_reports",
        "losses",
        "outstanding",
        "plane",
        "probe_sent_at",
        "probe_seq",
        "probe_streak",
        "probes_needed",
        "queued",
        "slot",
        "state",
        "trims",
        "uses",
        "value",
    )

    def __init__(self, slot: EvSlot, value: int, home: bool, state: EvState) -> None:
        self.slot = slot
        self.plane = slot.plane
        self.value = value
        self.home = home
        self.state = state
        self.uses = 0
        self.losses = 0
        self.trims = 0
        self.ecn_echoes = 0
        #: Every loss reported on it, also while it was retired already (``losses`` counts
        #: the retirements): a disproved loss reinstates it only if nothing else was lost.
        self.loss_reports = 0
        self.outstanding = 0  # data packets sent on it and not yet answered or given up
        self.queued = False  # on the free list
        self.probe_streak = 0
        self.probes_needed = 0
        self.probe_seq: int | None = None
        self.probe_sent_at = 0.0

    @property
    def active(self) -> bool:
        """Whether this EV currently holds its slot (it may still be on probation)."""
        return self.slot.current is self


class EvSlot:
    """A position in the rotation: its home EV, and the EV currently filling it."""

    __slots__ = ("current", "home", "index", "plane")

    def __init__(self, index: int, plane: int) -> None:
        self.index = index
        self.plane = plane
        self.home: EvEntry
        self.current: EvEntry


class EvSet:
    """The EV set of one connection and the background probing of retired EVs.

    Time is passed in (float seconds); the set sends nothing itself: ``probes_due`` returns the
    EVs to probe now and the connection sends the probes.
    """

    def __init__(
        self,
        config: MrcConfig,
        planes: int,
        ipv6: bool,
        rng: random.Random,
        homes: Sequence[tuple[int, int]] | None = None,
        min_active: int = 0,
        events: deque[Event] | None = None,
        qp: int = 0,
        standin_when_starved: bool = False,
    ) -> None:
        if planes < 1:
            raise ValueError("an EV set needs at least one plane")
        self._config = config
        self._ipv6 = ipv6
        self._rng = rng
        self._plane_usable = [True] * planes
        self._values_in_use: set[int] = set()
        self._slots: list[EvSlot] = []
        self._homes: dict[tuple[int, int], EvEntry] = {}
        #: The EVs were given (a profile's): no stand-ins, and the ``min_active`` floor.
        self._fixed = homes is not None
        #: Given EVs that may still take one random stand-in once none of them can carry data
        #: (the agent's exact-path EVs: a random EV names some path, as a hash would find one).
        self._standin_when_starved = standin_when_starved
        self._min_active = min_active
        self._events = events
        self._qp = qp
        if homes is not None:
            if not homes:
                raise ValueError("a given EV set needs at least one EV")
            for plane, value in homes:
                if not 0 <= plane < planes or not 0 <= value <= 0xFFFFFFFF:
                    raise ValueError(f"EV {value:#x} on plane {plane} is out of range")
                if (plane, value) in self._homes:
                    raise ValueError(f"EV {value:#010x} of plane {plane} is listed twice")
                self._add_home(len(self._slots), plane, value)
        else:
            for index in range(config.ev_set_size):
                self._add_home(index, index % planes, self._draw_value())
        self._cursor = 0
        self._free: deque[EvEntry] = deque()
        for slot in self._slots:
            slot.current.queued = True
            self._free.append(slot.current)
        self._probing: list[EvEntry] = []
        self._probe_now: list[EvEntry] = []
        self._by_seq: dict[int, EvEntry] = {}
        self._next_seq = 0
        self._next_round: float | None = None
        self._data_picks = 0  # data packets given an EV since the last probe round
        self._starved = False  # since the last round, data waited because no EV could carry it
        self._probe_credit = 0.0

    def _add_home(self, index: int, plane: int, value: int) -> None:
        slot = EvSlot(index, plane)
        entry = EvEntry(slot, value, home=True, state=_GOOD)
        slot.home = entry
        slot.current = entry
        self._slots.append(slot)
        self._homes[(plane, value)] = entry
        self._values_in_use.add(value)

    def _changed(self, entry: EvEntry) -> None:
        """Report a home EV's new state (stand-ins come and go unreported)."""
        if self._events is not None and entry.home:
            self._events.append(EvStateChanged(self._qp, entry.plane, entry.value, entry.state))

    def _carrying(self) -> int:
        """EVs that may carry data now (GOOD or SKIP in their slot)."""
        return sum(
            1 for slot in self._slots if slot.current.state is _GOOD or slot.current.state is _SKIP
        )

    # --- data path ------------------------------------------------------------------------

    def next_for_data(self) -> EvEntry | None:
        """The EV for the next data packet, or None if no EV may carry data right now.

        The caller must ``release`` it once that packet is answered or given up.
        """
        free = self._free
        usable = self._plane_usable
        while free:
            entry = free.popleft()
            entry.queued = False
            if entry.outstanding or entry.slot.current is not entry:
                continue  # stale: it returns to the list when released / if it comes back
            state = entry.state
            if state is _GOOD and usable[entry.plane]:
                entry.uses += 1
                entry.outstanding += 1
                self._data_picks += 1
                return entry
            if state is _SKIP and usable[entry.plane]:
                entry.state = _GOOD  # passed over once
                entry.queued = True
                free.append(entry)
        entry_or_none = self._rotate()
        if entry_or_none is not None:
            entry_or_none.outstanding += 1
            self._data_picks += 1
        else:
            self._starved = True
        return entry_or_none

    def next_after_timeout(self) -> EvEntry | None:
        """The EV for the resend a timeout sends: the plain rotation, accounted as data (the
        caller ``release``s it as for ``next_for_data``).

        A timeout says answers stopped, so the answered-EV list is stale: its head holds the EVs
        answered longest ago, and answers come back in bursts per path (a queue drains, a
        software switch gets the CPU), so after a path dies the head can be a run of EVs on
        that path. Taken from the list, each backed-off resend went down the dead path while
        the window held the rest, and the connection fell silent for its peer timeout. The
        rotation walks the slots, which spread over the paths (``agent.io.structured_evs``)
        or hash anywhere (random EVs), so successive timeouts try different paths (probes
        share the cursor, and retired EVs are passed over, so not strictly in turn)."""
        entry = self._rotate()
        if entry is None:
            self._starved = True
            return None
        entry.outstanding += 1
        self._data_picks += 1
        return entry

    def next_for_control(self) -> EvEntry | None:
        """An EV for a probe or re-sent completion request: the plain rotation, no accounting."""
        return self._rotate()

    def release(self, entry: EvEntry) -> None:
        """A data packet sent on ``entry`` was answered, or declared lost."""
        entry.outstanding -= 1
        if entry.outstanding == 0:
            self.offer(entry)

    def offer(self, entry: EvEntry) -> None:
        """``entry`` has no data packet outstanding any more: make it available to data if
        it may carry data (``release`` does this when the count reaches zero; the sender's
        acknowledgement loop counts down itself and calls this, for about every other packet
        acknowledged, hence no second call level)."""
        if (
            not entry.queued
            and entry.outstanding == 0
            and entry.slot.current is entry
            and (entry.state is _GOOD or entry.state is _SKIP)
        ):
            entry.queued = True
            self._free.append(entry)

    def _rotate(self) -> EvEntry | None:
        """Plain round robin over the slots.

        SKIP EVs are passed over once (and become GOOD); two passes guarantee a GOOD EV is
        found when every usable EV was SKIP.
        """
        slots = self._slots
        count = len(slots)
        usable = self._plane_usable
        index = self._cursor
        # Fast path: the slot at the cursor is GOOD and usable (the common case at line rate,
        # every EV busy and healthy), without setting up the loop.
        slot = slots[index]
        entry = slot.current
        if entry.state is _GOOD and usable[slot.plane]:
            index += 1
            self._cursor = 0 if index == count else index
            entry.uses += 1
            return entry
        for _ in range(2 * count):
            slot = slots[index]
            index += 1
            if index == count:
                index = 0
            entry = slot.current
            state = entry.state
            if state is _GOOD:
                if usable[slot.plane]:
                    self._cursor = index
                    entry.uses += 1
                    return entry
            elif state is _SKIP and usable[slot.plane]:
                entry.state = _GOOD
        self._cursor = index
        return None

    def skip(self, entry: EvEntry) -> None:
        """Pass over ``entry`` for one rotation (ECN echo, non-last-hop trim, SKIP_ONCE)."""
        if entry.state is _GOOD and entry.active:
            entry.state = _SKIP

    def retire(self, entry: EvEntry, now: float) -> bool:
        """``entry`` lost a packet silently or timed out: ASSUMED_BAD, its slot refilled.
        Returns whether this retired it (False: it was retired, denied or idle already)."""
        entry.loss_reports += 1
        if entry.state is not _GOOD and entry.state is not _SKIP:
            return False
        if not entry.active:
            return False
        if not self._plane_usable[entry.plane]:
            # Lost because a port of its plane (ours or the peer's) is down: no fault of the
            # path, which carries data again as soon as the port is back.
            return False
        if self._fixed and self._carrying() <= self._min_active:
            return False  # at the floor: keep using it rather than starve
        entry.losses += 1
        slot = entry.slot
        if entry.home:
            entry.state = _BAD
            self._start_probing(entry, self._config.probes_to_revive, now, at_once=False)
            self._changed(entry)
        else:
            self._discard(entry)
        if not self._fixed or (self._standin_when_starved and self._carrying() == 0):
            self._fill_with_standin(slot, now)
        return True

    def reinstate(self, entry: EvEntry, loss_reports: int) -> bool:
        """The loss that retired home EV ``entry`` is disproved (the packet was late, not
        lost): it takes its slot back without probes, its stand-in is dropped, and the loss
        no longer counts against it. Only if it is still retired and no loss was reported on
        it since (``loss_reports`` is its count at the retirement); returns whether it was."""
        if entry.state is not _BAD or not entry.home or entry.loss_reports != loss_reports:
            return False
        entry.losses -= 1
        self._admit(entry)
        return True

    # --- operator and port state ----------------------------------------------------------

    def deny(self, plane: int, value: int, now: float) -> None:
        """Operator: never use home EV ``value`` of ``plane``; a stand-in takes its slot."""
        entry = self._home(plane, value)
        if entry.state is _DENIED:
            return
        self._stop_probing(entry)
        was_active = entry.active
        entry.state = _DENIED
        self._changed(entry)
        if was_active and not self._fixed:
            self._fill_with_standin(entry.slot, now)

    def allow(self, plane: int, value: int, now: float) -> None:
        """Operator: lift a denial; the EV must then earn its slot back through probes."""
        entry = self._home(plane, value)
        if entry.state is not _DENIED:
            return
        entry.state = _BAD
        self._changed(entry)
        self._start_probing(entry, self._config.probes_to_revive, now, at_once=True)

    def force_retire(self, plane: int, value: int, now: float) -> None:
        """Operator: treat home EV ``value`` of ``plane`` as ASSUMED_BAD now (as a loss would,
        but below the ``min_active`` floor too); probes bring it back."""
        entry = self._home(plane, value)
        if entry.state is not _GOOD and entry.state is not _SKIP:
            return
        slot = entry.slot
        was_active = entry.active
        entry.state = _BAD
        self._start_probing(entry, self._config.probes_to_revive, now, at_once=False)
        self._changed(entry)
        if was_active and not self._fixed:
            self._fill_with_standin(slot, now)

    def force_good(self, plane: int, value: int) -> None:
        """Operator: home EV ``value`` of ``plane`` is GOOD now (denied or retired before),
        without probes; it takes its slot back."""
        entry = self._home(plane, value)
        if entry.state is _GOOD or entry.state is _SKIP:
            return
        self._admit(entry)

    def state_of(self, plane: int, value: int) -> EvState:
        """The state of home EV ``value`` of ``plane`` (``KeyError`` if it is none)."""
        return self._home(plane, value).state

    def homes(self) -> list[tuple[int, int, EvState]]:
        """Every home EV as (plane, value, state), in slot order."""
        return [(slot.plane, slot.home.value, slot.home.state) for slot in self._slots]

    def set_plane_usable(self, plane: int, usable: bool) -> None:
        """Use (or stop using) every EV of ``plane``: its port, or the peer's, went up or down."""
        self._plane_usable[plane] = usable
        if usable:
            for slot in self._slots:
                if slot.plane == plane:
                    self.offer(slot.current)

    # --- probing --------------------------------------------------------------------------

    def probes_due(
        self, now: float, timeout: float, interval: float | None = None
    ) -> list[tuple[EvEntry, int]]:
        """EVs to probe now, each with the probe's sequence number.

        Rounds come every ``interval`` (default ``probe_interval``; the connection stretches
        it to the minimum RTT, since no answer can come sooner and a round per millisecond on
        a path of seconds woke an idle agent a thousand times a second for nothing).

        A probe unanswered for ``timeout`` counts as a failure: the EV's streak restarts (a
        stand-in is replaced). Probes go out at once for new stand-ins and EVs just allowed.
        Every ``probe_interval`` a round re-probes the EVs under probation: those whose last
        probe was answered (a path that looks repaired) every round, those with nothing
        answered yet (retired home EVs, and stand-ins drawn after a stand-in failed its
        probe) only within the round's budget (see ``_round_budget``), round robin, so that
        a dead path's many EVs cost a bounded share of the packets sent instead of one
        probe each per interval.
        """
        due: list[tuple[EvEntry, int]] = []
        if self._probe_now:
            waiting, self._probe_now = self._probe_now, []
            for entry in waiting:
                if entry.state is _BAD and entry.probe_seq is None and self._probable(entry):
                    due.append((entry, self._send_probe(entry, now)))
        if self._next_round is not None and now >= self._next_round:
            if interval is None:
                interval = self._config.probe_interval
            budget = self._round_budget(timeout, interval)
            rationed: list[EvEntry] = []
            for entry in list(self._probing):
                if not self._probable(entry):
                    continue
                if entry.probe_seq is not None:
                    if now - entry.probe_sent_at < timeout:
                        continue
                    self._probe_failed(entry, now)
                    if entry.state is not _BAD or entry not in self._probing:
                        continue  # a discarded stand-in: its replacement is probed at once
                if entry.probe_streak == 0:
                    if budget == 0:
                        continue
                    budget -= 1
                    rationed.append(entry)
                due.append((entry, self._send_probe(entry, now)))
            for entry in rationed:  # to the back of the line: round robin
                self._probing.remove(entry)
                self._probing.append(entry)
            self._next_round = now + interval if self._probing else None
        return due

    def _round_budget(self, timeout: float, interval: float) -> int:
        """Probes a round may spend on retired EVs with no answered probe yet.

        ``probe_share`` of the data packets sent since the last round, so that probing grows
        with the traffic and never dominates it (on a software fabric every packet costs the
        same, however small). An idle round earns as much as one data packet, so that an idle
        connection still finds a repaired path, slowly. A *starved* round (data waited because
        no EV of a usable plane could carry it: every slot retired or on probation, as after
        a timeout that retired every EV in flight) earns at least one probe per probe
        ``timeout`` (the RTO, backoff included): there the budget would otherwise hold back
        the very probes that let data flow again, one probe per ``1 / probe_share`` rounds
        while every slot waits; and keeping one such probe in flight at a time finds a
        repaired path within about one RTO, as a retransmission would, while a long outage
        costs one probe per backed-off RTO. Only the fraction of a probe carries over to the
        next round (what a round leaves unspent is dropped), so that nothing saves up a burst.
        """
        picks, self._data_picks = self._data_picks, 0
        starved, self._starved = self._starved, False
        earned = self._config.probe_share * max(picks, 1)
        if starved:
            earned = max(earned, interval / timeout)
        credit = self._probe_credit + earned
        budget = int(credit)
        self._probe_credit = credit - budget
        return budget

    def on_probe_answered(self, seq: int, value: int) -> bool:
        """A probe response arrived; False if it answers no outstanding probe of ours."""
        entry = self._by_seq.get(seq)
        if entry is None or entry.value != value:
            return False
        del self._by_seq[seq]
        entry.probe_seq = None
        if entry.state is not _BAD:
            return True
        entry.probe_streak += 1
        if entry.probe_streak >= entry.probes_needed:
            self._admit(entry)
        return True

    def next_probe_time(self) -> float | None:
        """When ``probes_due`` next has work, or None when nothing is being probed."""
        if self._probe_now:
            return 0.0
        return self._next_round

    # --- reporting ------------------------------------------------------------------------

    def report(self) -> tuple[EvReport, ...]:
        """Every EV the set holds (slot occupants, then retired or denied home EVs)."""
        seen: list[EvEntry] = []
        for slot in self._slots:
            seen.append(slot.current)
        for slot in self._slots:
            if slot.current is not slot.home:
                seen.append(slot.home)
        return tuple(
            EvReport(e.plane, e.value, e.state, e.home, e.uses, e.losses, e.trims, e.ecn_echoes)
            for e in seen
        )

    def active_entries(self) -> list[EvEntry]:
        """The EV currently filling each slot, in rotation order."""
        return [slot.current for slot in self._slots]

    # --- internals ------------------------------------------------------------------------

    def _home(self, plane: int, value: int) -> EvEntry:
        entry = self._homes.get((plane, value))
        if entry is None:
            raise KeyError(f"EV {value:#010x} is not a home EV of plane {plane}")
        return entry

    def _probable(self, entry: EvEntry) -> bool:
        return self._plane_usable[entry.plane]

    def _draw_value(self) -> int:
        config = self._config
        while True:
            port = self._rng.randint(config.ev_port_min, config.ev_port_max)
            label = self._rng.getrandbits(16) if self._ipv6 else 0
            value = ev_from_headers(port, label)
            if value not in self._values_in_use:
                self._values_in_use.add(value)
                return value

    def _fill_with_standin(self, slot: EvSlot, now: float, at_once: bool = True) -> None:
        needed = self._config.probes_to_admit
        standin = EvEntry(slot, self._draw_value(), home=False, state=_BAD if needed else _GOOD)
        slot.current = standin
        if needed:
            self._start_probing(standin, needed, now, at_once=at_once)
        else:
            self.offer(standin)

    def _start_probing(self, entry: EvEntry, needed: int, now: float, at_once: bool) -> None:
        entry.probe_streak = 0
        entry.probes_needed = needed
        if entry not in self._probing:
            self._probing.append(entry)
        if at_once:
            self._probe_now.append(entry)
        if self._next_round is None:
            self._next_round = now + self._config.probe_interval

    def _stop_probing(self, entry: EvEntry) -> None:
        if entry in self._probing:
            self._probing.remove(entry)
        if entry in self._probe_now:
            # Still waiting for its at-once probe: sent after it was dropped, that probe's
            # answer admitted it over the slot's own EV, which then left the set for good.
            self._probe_now.remove(entry)
        if entry.probe_seq is not None:
            self._by_seq.pop(entry.probe_seq, None)
            entry.probe_seq = None

    def _send_probe(self, entry: EvEntry, now: float) -> int:
        seq = self._next_seq
        self._next_seq = (seq + 1) & 0xFFFF
        stale = self._by_seq.pop(seq, None)
        if stale is not None:
            stale.probe_seq = None
        self._by_seq[seq] = entry
        entry.probe_seq = seq
        entry.probe_sent_at = now
        return seq

    def _probe_failed(self, entry: EvEntry, now: float) -> None:
        if entry.probe_seq is not None:
            self._by_seq.pop(entry.probe_seq, None)
            entry.probe_seq = None
        entry.probe_streak = 0
        if not entry.home:
            slot = entry.slot
            self._discard(entry)
            # Its replacement waits for the budget: when a whole plane or fabric is dead,
            # failed stand-ins replaced and probed at once would probe every slot per timeout.
            self._fill_with_standin(slot, now, at_once=False)

    def _admit(self, entry: EvEntry) -> None:
        self._stop_probing(entry)
        entry.state = _GOOD
        slot = entry.slot
        if slot.current is not entry:
            displaced = slot.current
            self._discard(displaced)
            slot.current = entry
        self._changed(entry)
        self.offer(entry)

    def _discard(self, entry: EvEntry) -> None:
        """Drop a stand-in for good: it leaves the slot, probing and the value pool."""
        self._stop_probing(entry)
        entry.state = _BAD
        self._values_in_use.discard(entry.value)
