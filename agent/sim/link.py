"""One direction of a simulated link: a switch output queue, a wire, and its impairments.

A link serialises packets at its rate through strict-priority queues, by DSCP only as the
MRC fabric's switches classify: control, trimmed headers and RoCE ACK/NAKs and CNPs go first;
then RoCE data in the lossless class, a deep queue of its own (``lossless_bytes``: no congestion
drops while it has room, never trimmed; pause frames are not modelled, as on the BMv2 target);
MRC data waits in a bounded queue. When that queue is full a trimmable data packet is trimmed
(cut to its headers, re-marked TRIMMED, or TRIMMED_LASTHOP on a host-facing link, and forwarded
at high priority) or, with trimming off, dropped. ECT data of either class is CE-marked
RED-style on its own queue's depth, except on last hops (switches mark only in the fabric).
Independently of the queues, a link can lose, reorder (extra random delay) or duplicate packets
at random, and can be failed and repaired: a failed link drops everything, including what was
on the wire when it failed.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from agent.core.codec import trimmed_length
from agent.core.config import DscpMap
from agent.sim.packet import SimPacket
from agent.sim.scheduler import Scheduler
from wire.constants import ECN_CE, ECN_ECT0, ECN_ECT1


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """Behaviour of one link direction. ``rate`` in bytes/s (None: infinitely fast, no queue),
    ``delay`` one-way propagation in seconds, queue and ECN thresholds in bytes."""

    rate: float | None = 125e6
    delay: float = 10e-6
    queue_bytes: int = 64 * 1100
    #: The lossless RoCE class's queue (RoCE data only) and its ECN thresholds, on its own depth.
    lossless_bytes: int = 4096 * 1100
    lossless_ecn_min_bytes: int = 8 * 1100
    lossless_ecn_max_bytes: int = 32 * 1100
    ecn_min_bytes: int = 8 * 1100
    ecn_max_bytes: int = 32 * 1100
    ecn_max_probability: float = 0.2
    ecn: bool = True
    trim: bool = True
    loss: float = 0.0
    reorder: float = 0.0
    reorder_delay: float = 50e-6
    duplicate: float = 0.0

    def __post_init__(self) -> None:
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be > 0 bytes/s (or None)")
        if self.delay < 0 or self.reorder_delay < 0:
            raise ValueError("delays must be >= 0")
        for name in ("loss", "reorder", "duplicate", "ecn_max_probability"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability, got {value}")
        if self.queue_bytes < 0 or self.lossless_bytes < 0:
            raise ValueError("queue sizes must be >= 0 bytes")
        if not 0 <= self.lossless_ecn_min_bytes <= self.lossless_ecn_max_bytes:
            raise ValueError("need 0 <= lossless_ecn_min_bytes <= lossless_ecn_max_bytes")
        if not 0 <= self.ecn_min_bytes <= self.ecn_max_bytes:
            raise ValueError("need 0 <= ecn_min_bytes <= ecn_max_bytes")


class LinkCounters:
    """What a link did to the packets offered to it."""

    __slots__ = (
        "data_offered",
        "delivered",
        "dropped_down",
        "dropped_overflow",
        "duplicated",
        "ecn_marked",
        "lost",
        "offered",
        "reordered",
        "trimmed",
    )

    def __init__(self) -> None:
        self.offered = 0
        self.data_offered = 0
        self.delivered = 0
        self.dropped_down = 0
        self.dropped_overflow = 0
        self.lost = 0
        self.trimmed = 0
        self.ecn_marked = 0
        self.reordered = 0
        self.duplicated = 0

    def add(self, other: LinkCounters) -> None:
        """Add ``other``'s counts to these (a fabric's totals)."""
        self.offered += other.offered
        self.data_offered += other.data_offered
        self.delivered += other.delivered
        self.dropped_down += other.dropped_down
        self.dropped_overflow += other.dropped_overflow
        self.lost += other.lost
        self.trimmed += other.trimmed
        self.ecn_marked += other.ecn_marked
        self.reordered += other.reordered
        self.duplicated += other.duplicated


class Link:
    """One direction of a link; ``deliver`` receives what comes out of the far end."""

    def __init__(
        self,
        name: str,
        config: LinkConfig,
        scheduler: Scheduler,
        rng: random.Random,
        dscp: DscpMap,
        *,
        last_hop: bool = False,
        trace: bool = False,
    ) -> None:
        self.name = name
        self.config = config
        self.last_hop = last_hop
        self.up = True
        self.counters = LinkCounters()
        #: Times data packets were offered to this link (only when ``trace``).
        self.data_times: list[float] | None = [] if trace else None
        #: Time of the first data packet dropped because the link was down.
        self.first_down_drop: float | None = None
        self.deliver: Callable[[SimPacket], None] = _nowhere
        self._scheduler = scheduler
        self._rng = rng
        self._data_dscps = frozenset(
            {dscp.trimmable, dscp.trimmable_retx, dscp.no_trim, dscp.roce_data}
        )
        self._lossless_dscp = dscp.roce_data
        self._trimmable = frozenset({dscp.trimmable, dscp.trimmable_retx})
        self._trimmed_dscp = dscp.trimmed_lasthop if last_hop else dscp.trimmed
        self._high: deque[SimPacket] = deque()
        self._low: deque[SimPacket] = deque()
        self._low_bytes = 0
        self._lossless: deque[SimPacket] = deque()
        self._lossless_bytes = 0
        self._busy = False
        self._epoch = 0  # bumped on failure: packets on the wire of an older epoch are lost

    # --- control --------------------------------------------------------------------------

    def fail(self) -> None:
        """Take the link down: queued and in-flight packets are lost."""
        self.up = False
        self._epoch += 1
        dropped = len(self._high) + len(self._low) + len(self._lossless)
        self.counters.dropped_down += dropped
        self._high.clear()
        self._low.clear()
        self._low_bytes = 0
        self._lossless.clear()
        self._lossless_bytes = 0
        self._busy = False

    def repair(self) -> None:
        """Bring the link back up."""
        self.up = True

    # --- data path ------------------------------------------------------------------------

    def send(self, packet: SimPacket) -> None:
        """Offer ``packet`` to the link."""
        counters = self.counters
        counters.offered += 1
        config = self.config
        is_data = packet.dscp in self._data_dscps
        now = self._scheduler.now
        if is_data:
            counters.data_offered += 1
            if self.data_times is not None:
                self.data_times.append(now)
        if not self.up:
            counters.dropped_down += 1
            if is_data and self.first_down_drop is None:
                self.first_down_drop = now
            return
        rng = self._rng
        if config.loss and rng.random() < config.loss:
            counters.lost += 1
            return
        if config.rate is None:
            self._propagate(packet)
            return
        if not is_data:
            self._high.append(packet)
        elif packet.dscp == self._lossless_dscp:
            size = packet.wire_size
            if self._lossless_bytes + size > config.lossless_bytes:
                counters.dropped_overflow += 1
                return
            if config.ecn and not self.last_hop and packet.ecn in (ECN_ECT0, ECN_ECT1):
                self._maybe_mark(
                    packet,
                    self._lossless_bytes,
                    config.lossless_ecn_min_bytes,
                    config.lossless_ecn_max_bytes,
                )
            self._lossless.append(packet)
            self._lossless_bytes += size
        else:
            size = packet.wire_size
            if self._low_bytes + size > config.queue_bytes:
                if not (config.trim and packet.dscp in self._trimmable and self._trim(packet)):
                    counters.dropped_overflow += 1
                    return
                self._high.append(packet)
            else:
                if config.ecn and not self.last_hop and packet.ecn in (ECN_ECT0, ECN_ECT1):
                    self._maybe_mark(
                        packet, self._low_bytes, config.ecn_min_bytes, config.ecn_max_bytes
                    )
                self._low.append(packet)
                self._low_bytes += size
        if not self._busy:
            self._transmit_next()

    def _trim(self, packet: SimPacket) -> bool:
        cut = trimmed_length(packet.payload)
        if cut is None:
            return False
        packet.payload = packet.payload[:cut]
        packet.dscp = self._trimmed_dscp
        packet.trimmed_at = self.name
        self.counters.trimmed += 1
        return True

    def _maybe_mark(self, packet: SimPacket, depth: int, low: int, high: int) -> None:
        if depth < low:
            return
        if depth >= high:
            probability = 1.0
        else:
            probability = self.config.ecn_max_probability * (depth - low) / (high - low)
        if self._rng.random() < probability:
            packet.ecn = ECN_CE
            self.counters.ecn_marked += 1

    def _transmit_next(self) -> None:
        if self._high:
            packet = self._high.popleft()
        elif self._lossless:
            packet = self._lossless.popleft()
            self._lossless_bytes -= packet.wire_size
        elif self._low:
            packet = self._low.popleft()
            self._low_bytes -= packet.wire_size
        else:
            self._busy = False
            return
        self._busy = True
        rate = self.config.rate
        assert rate is not None
        epoch = self._epoch
        self._scheduler.after(packet.wire_size / rate, lambda: self._sent(packet, epoch))

    def _sent(self, packet: SimPacket, epoch: int) -> None:
        if epoch != self._epoch:
            return
        self._propagate(packet)
        self._transmit_next()

    def _propagate(self, packet: SimPacket) -> None:
        config = self.config
        rng = self._rng
        delay = config.delay
        if config.reorder and rng.random() < config.reorder:
            delay += rng.uniform(0.0, config.reorder_delay)
            self.counters.reordered += 1
        epoch = self._epoch
        self._scheduler.after(delay, lambda: self._arrive(packet, epoch))
        if config.duplicate and rng.random() < config.duplicate:
            self.counters.duplicated += 1
            twin = packet.copy()
            extra = rng.uniform(0.0, config.reorder_delay)
            self._scheduler.after(delay + extra, lambda: self._arrive(twin, epoch))

    def _arrive(self, packet: SimPacket, epoch: int) -> None:
        if epoch != self._epoch or not self.up:
            self.counters.dropped_down += 1
            return
        self.counters.delivered += 1
        self.deliver(packet)


def _nowhere(packet: SimPacket) -> None:
    raise RuntimeError("link delivers nowhere: connect it before sending")
