"""Link liveness from probes: a link that misses ``miss_limit`` probes in a row is down.

Sans-IO and clock-free: the caller says when each probe was sent and received, and asks for
the changes at a given time. That keeps the state machine testable with a fake clock, and makes
misses count *probes that were sent*, not intervals that passed: when the controller itself
stalls (a long write, a GC pause) no probe goes out and no link is wrongly declared down.

Each listed switch-to-switch link has two directions (one per sending end). A direction with
``miss_limit`` missed probes is down; any probe of it that arrives brings it back up. A link
goes down when both of its directions are down (a cut takes both), or one of them is and the
far switch is lost, or one of them has been down for ``silence_limit`` (a one-way failure);
it comes back up when both directions are up. One direction alone does not take a link down
at once because BMv2 sends each egress port's packets from its own thread: one thread of a
busy switch can fall tens of milliseconds behind its others, delaying the probes of one port,
while the far end's probes (another switch) are unaffected.

When is a probe missed, rather than late? On a small machine a BMv2 or the controller can stall
for tens of milliseconds, delaying every probe one switch sends or hands up; counting those as
misses would take down every link of that switch, and with them every route through it. A
probe from switch S to switch R therefore counts as missed once ``flight_allowance`` has passed
since it was sent and there is evidence on both sides that it is lost, not late:

* on R's side: R has since handed up a probe (from anyone) that was sent *later*; or R has
  handed up nothing for ``silence_limit`` and the probe is that old;
* on S's side: a probe S sent *later* has arrived somewhere; or nothing S sent has arrived for
  ``silence_limit`` and the probe is that old.

Or R was reported lost (:meth:`LinkMonitor.mark_lost`: its channel dropped, as when its BMv2 is
killed): nothing can arrive there, so every overdue probe toward it is a miss at once.

A cut link shows both at once (the ends' other links keep delivering), so it is found after
``miss_limit`` probes; a stalled switch delays the evidence instead of faking it; a switch whose
only link is cut, or whose data plane is dead, is found after the silence limit.

Every link starts up: the fabric is assumed to be as the topology lists it until probes say
otherwise, so the first intent uses every link, and a dead one is dropped after a few probes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topologies.model import Endpoint, Link, LinkId

#: Unanswered probes remembered per direction. An up direction holds only those sent since its
#: last arrival (a few, or up to the silence limit's worth while its switch is silent); a down
#: one keeps the latest, whose send times date a recovering switch's progress.
PENDING_CAPACITY = 1024


class LinkState(StrEnum):
    """A link's liveness."""

    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class LinkChange:
    """A link went up or down.

    ``at`` is when the monitor noticed; ``since`` is the best estimate of when it happened: for
    DOWN the send time of the first missed probe (the cut happened no later), for UP the arrival
    of the probe that brought it back.
    """

    link: LinkId
    state: LinkState
    at: float
    since: float


@dataclass(frozen=True)
class LinkStatus:
    """A link's current state and when it last changed (None: never, it is as assumed)."""

    state: LinkState
    changed_at: float | None


@dataclass
class _Direction:
    """Probes from one end of a link to the other."""

    sender: Endpoint
    receiver: Endpoint
    link: LinkId
    pending: deque[tuple[int, float]]
    up: bool = True
    #: For a direction that went down: the send time of its first missed probe.
    first_missed_at: float | None = None
    #: For a direction that came back: when its probe arrived.
    recovered_at: float | None = None
    #: When the direction was found down (None while up).
    down_at: float | None = None


@dataclass
class _LinkRecord:
    directions: tuple[_Direction, _Direction]
    state: LinkState = LinkState.UP
    changed_at: float | None = None


@dataclass
class _Node:
    """Probe progress through one switch, as a receiver and as a sender."""

    #: Newest send time among the probes it handed up, and when it last handed one up.
    received_progress: float = -math.inf
    last_heard: float = -math.inf
    #: Newest send time among its probes that arrived anywhere, and when one last arrived.
    sent_progress: float = -math.inf
    last_delivered: float = -math.inf
    lost: bool = False


@dataclass
class LinkMonitor:
    """Liveness of the listed switch-to-switch links (see the module docs)."""

    links: Iterable[Link]
    miss_limit: int
    flight_allowance: float
    silence_limit: float
    _links: dict[LinkId, _LinkRecord] = field(init=False, default_factory=dict)
    _by_sender: dict[Endpoint, _Direction] = field(init=False, default_factory=dict)
    _nodes: dict[str, _Node] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.miss_limit < 1:
            raise ValueError(f"miss_limit must be at least 1, not {self.miss_limit}")
        if self.flight_allowance < 0:
            raise ValueError(f"flight_allowance must not be negative: {self.flight_allowance}")
        if self.silence_limit < self.flight_allowance:
            raise ValueError("silence_limit must be at least the flight allowance")
        capacity = max(PENDING_CAPACITY, 2 * self.miss_limit)
        for link in self.links:
            if link.id in self._links:
                raise ValueError(f"link {link.id} listed twice")
            forward = _Direction(link.a, link.b, link.id, deque(maxlen=capacity))
            backward = _Direction(link.b, link.a, link.id, deque(maxlen=capacity))
            for direction in (forward, backward):
                if direction.sender in self._by_sender:
                    raise ValueError(f"port {direction.sender} is an end of two links")
                self._by_sender[direction.sender] = direction
                self._nodes.setdefault(direction.sender.node, _Node())
            self._links[link.id] = _LinkRecord((forward, backward))

    def monitors(self, sender: Endpoint) -> bool:
        """Whether probes sent from ``sender`` are tracked (it is an end of a listed link)."""
        return sender in self._by_sender

    def probe_sent(self, sender: Endpoint, sequence: int, at: float) -> None:
        """A probe left ``sender``; ignored for ports that are no end of a listed link."""
        direction = self._by_sender.get(sender)
        if direction is not None:
            direction.pending.append((sequence, at))

    def probe_withdrawn(self, sender: Endpoint, sequence: int) -> None:
        """The probe recorded as sent from ``sender`` never left (the send failed)."""
        direction = self._by_sender.get(sender)
        if direction is not None:
            kept = [entry for entry in direction.pending if entry[0] != sequence]
            direction.pending.clear()
            direction.pending.extend(kept)

    def probe_received(
        self, sender: Endpoint, receiver: Endpoint, sequence: int, at: float
    ) -> bool:
        """A probe from ``sender`` arrived at ``receiver``.

        Returns False when no listed link joins the two ports (an unlisted or miswired link:
        the caller reports it; the monitor ignores it).
        """
        direction = self._by_sender.get(sender)
        if direction is None or direction.receiver != receiver:
            return False
        to_node, from_node = self._nodes[receiver.node], self._nodes[sender.node]
        to_node.last_heard = from_node.last_delivered = at
        while direction.pending and direction.pending[0][0] <= sequence:
            number, sent_at = direction.pending.popleft()
            if number == sequence:
                to_node.received_progress = max(to_node.received_progress, sent_at)
                from_node.sent_progress = max(from_node.sent_progress, sent_at)
        if not direction.up:
            direction.up = True
            direction.first_missed_at = None
            direction.recovered_at = at
            direction.down_at = None
        return True

    def mark_lost(self, node: str) -> None:
        """``node`` cannot hand probes up (its channel is gone): overdue probes toward it are
        misses at once."""
        if node in self._nodes:
            self._nodes[node].lost = True

    def mark_found(self, node: str) -> None:
        """``node`` hands probes up again; its progress is judged afresh."""
        if node in self._nodes:
            self._nodes[node] = _Node()

    def assume(self, down: frozenset[LinkId], at: float) -> None:
        """Take ``down`` (another controller's view: a backup that sends no probes follows its
        peer's) as the links' states, reporting no change: a link listed comes back up only
        once probes cross it both ways, as one found down by probes would, and one not listed
        is up until probes miss. Unlisted links are ignored."""
        for link_id, record in self._links.items():
            is_down = link_id in down
            if is_down == (record.state is LinkState.DOWN):
                continue
            record.state = LinkState.DOWN if is_down else LinkState.UP
            record.changed_at = at
            for direction in record.directions:
                direction.up = not is_down
                direction.first_missed_at = at if is_down else None
                direction.down_at = at if is_down else None
                direction.recovered_at = None

    def evaluate(self, now: float) -> list[LinkChange]:
        """Apply the misses due by ``now``; the links whose state changed since the last call."""
        changes: list[LinkChange] = []
        for link_id, record in self._links.items():
            for direction in record.directions:
                self._count_misses(direction, now)
            state = self._link_state(record, now)
            if state is record.state:
                continue
            record.state = state
            record.changed_at = now
            changes.append(LinkChange(link_id, state, now, self._since(record, state, now)))
        return changes

    def status(self) -> Mapping[LinkId, LinkStatus]:
        """Every monitored link with its state."""
        return {
            link_id: LinkStatus(record.state, record.changed_at)
            for link_id, record in self._links.items()
        }

    def down_links(self) -> frozenset[LinkId]:
        """The links currently down."""
        return frozenset(
            link_id for link_id, record in self._links.items() if record.state is LinkState.DOWN
        )

    def _link_state(self, record: _LinkRecord, now: float) -> LinkState:
        down = [d for d in record.directions if not d.up]
        if not down:
            return LinkState.UP
        if record.state is LinkState.DOWN or len(down) == 2:
            return LinkState.DOWN
        (direction,) = down
        far_lost = self._nodes[direction.receiver.node].lost
        one_way_for = now - (direction.down_at if direction.down_at is not None else now)
        if far_lost or one_way_for >= self.silence_limit:
            return LinkState.DOWN
        return LinkState.UP

    def _count_misses(self, direction: _Direction, now: float) -> None:
        if not direction.up:
            return
        to_node = self._nodes[direction.receiver.node]
        from_node = self._nodes[direction.sender.node]
        receiver_silent = now - to_node.last_heard >= self.silence_limit
        sender_silent = now - from_node.last_delivered >= self.silence_limit
        missed = []
        for _, sent in direction.pending:
            if sent + self.flight_allowance > now:
                break  # pending is in send order: the rest are younger still
            old_enough = now - sent >= self.silence_limit
            receiver_says = to_node.received_progress > sent or (receiver_silent and old_enough)
            sender_says = from_node.sent_progress > sent or (sender_silent and old_enough)
            if to_node.lost or (receiver_says and sender_says):
                missed.append(sent)
        if len(missed) >= self.miss_limit:
            direction.up = False
            direction.first_missed_at = missed[0]
            direction.recovered_at = None
            direction.down_at = now

    @staticmethod
    def _since(record: _LinkRecord, state: LinkState, now: float) -> float:
        if state is LinkState.DOWN:
            times = [d.first_missed_at for d in record.directions if d.first_missed_at is not None]
        else:
            times = [d.recovered_at for d in record.directions if d.recovered_at is not None]
        if not times:
            return now
        return min(times) if state is LinkState.DOWN else max(times)
