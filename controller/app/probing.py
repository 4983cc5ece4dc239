"""The LLDP probe loop: probes out of every in-service switch each interval, read back at the
neighbour, and the link changes their misses mean.

Frames are built and parsed by :mod:`controller.app.lldp`; which probes count as missed is
:mod:`controller.app.liveness`'s state machine. Probes seen at a port the topology does not join
to the sender are reported, never used; malformed ones and those of another controller
instance are counted and dropped.

A switch only sends and takes probes while in service. Probes toward a neighbour that is
still coming up (being reconciled, or not yet connected in the first ``startup_grace_s``) are
not counted as missed: its links are unknown, not down, so a controller start or take-over
does not flap every link. A neighbour that was connected and is lost (channel down, a crashed
BMv2) misses probes like a cut cable, so its links go down and the fabric routes around it;
a restarted switch therefore rejoins only once it has been reprogrammed, and its neighbours
never route into empty tables.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.app.clock import Clock
from controller.app.discovery import DiscoverySettings
from controller.app.eventlog import EventLog
from controller.app.liveness import LinkChange, LinkMonitor, LinkStatus
from controller.app.lldp import ForeignLldp, Probe, ProbeDecodeError, decode_probe, encode_probe
from controller.app.switch_view import SwitchView
from controller.southbound.interface import Southbound, SwitchRole
from topologies.model import Endpoint, LinkId, Topology

#: At most one log line per switch about malformed probes in this many seconds.
MALFORMED_LOG_INTERVAL_S = 1.0


@dataclass
class UnlistedLink:
    """Probes seen between two ports that the topology does not join."""

    sender: Endpoint
    receiver: Endpoint
    first_seen: float
    last_seen: float
    probes: int = 1


@dataclass
class ProbeStats:
    """Probe counts since the controller started."""

    sent: int = 0
    received: int = 0
    malformed: int = 0
    foreign: int = 0
    other_controller: int = 0
    ignored: int = 0


@dataclass
class _MalformedLog:
    last_logged: float = -math.inf
    suppressed: int = 0


class LinkProber:
    """Sends the probes of every round, takes those handed up, and reports link changes."""

    def __init__(
        self,
        topology: Topology,
        southbound: Southbound,
        settings: DiscoverySettings,
        views: Mapping[str, SwitchView],
        on_changes: Callable[[list[LinkChange]], None],
        *,
        log: EventLog,
        clock: Clock,
        nonce: int,
        started_at: float,
    ) -> None:
        """Probe ``topology``'s switches as their ``views`` allow; ``on_changes`` gets each
        round's link changes; ``nonce`` marks this controller's probes; the startup grace runs
        from ``started_at``."""
        self.topology = topology
        self.southbound = southbound
        self.settings = settings
        self.views = views
        self.on_changes = on_changes
        self.log = log
        self.clock = clock
        self.nonce = nonce
        self.started_at = started_at
        self.stats = ProbeStats()
        self.unlisted_links: dict[LinkId, UnlistedLink] = {}
        self._monitor = LinkMonitor(
            topology.links, settings.miss_limit, settings.flight_allowance_s, settings.silence_s
        )
        self._ports = {
            switch.name: tuple(
                port
                for port in topology.switch_ports(switch.name)
                if settings.probe_host_ports or self._monitor.monitors(Endpoint(switch.name, port))
            )
            for switch in topology.switches
        }
        self._sequence = 0
        self._malformed: dict[str, _MalformedLog] = {}

    async def run(self) -> None:
        """One round each interval until cancelled; a round that falls behind is skipped."""
        interval = self.settings.interval_s
        deadline = self.clock.monotonic()
        while True:
            try:
                await self.tick()
            except Exception as error:  # a bug here must not stop liveness for good
                self.log.emit("internal_error", where="probe_tick", error=repr(error))
            deadline += interval
            now = self.clock.monotonic()
            if deadline < now:  # fell behind: skip the missed rounds rather than burst
                deadline = now
            await asyncio.sleep(deadline - now)

    async def tick(self) -> list[LinkChange]:
        """One probe round: send from every in-service switch, then apply due misses."""
        self._sequence += 1
        senders = [
            name
            for name, view in self.views.items()
            if view.in_service and view.role is SwitchRole.PRIMARY
        ]
        await asyncio.gather(*(self._send_probes(name, self._sequence) for name in senders))
        changes = self._monitor.evaluate(self.clock.monotonic())
        if changes:
            self.on_changes(changes)
        return changes

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        """A probe came up from ``port`` of ``switch``: feed liveness, or count why not."""
        stats = self.stats
        view = self.views.get(switch)
        if view is None or not view.in_service:
            stats.ignored += 1
            return
        try:
            probe = decode_probe(frame)
        except ForeignLldp:
            stats.foreign += 1
            return
        except ProbeDecodeError as error:
            stats.malformed += 1
            self._log_malformed(switch, port, str(error))
            return
        if probe.nonce != self.nonce:
            stats.other_controller += 1
            return
        stats.received += 1
        sender = Endpoint(probe.switch, probe.port)
        receiver = Endpoint(switch, port)
        now = self.clock.monotonic()
        if not self._monitor.probe_received(sender, receiver, probe.sequence, now):
            self._note_unlisted(sender, receiver, now)

    def switch_lost(self, switch: str) -> None:
        """``switch`` cannot hand probes up (its channel is gone): probes toward it are missed."""
        self._monitor.mark_lost(switch)

    def switch_found(self, switch: str) -> None:
        """``switch`` is in service again: its probes are judged afresh."""
        self._monitor.mark_found(switch)

    def assume_down(self, down: frozenset[LinkId]) -> None:
        """Start from ``down`` (the peer's view, while this one sends no probes): a link in it
        comes back up once probes cross it, so a link restored before a takeover does not stay
        down for good (``LinkMonitor.assume``)."""
        self._monitor.assume(down, self.clock.monotonic())

    def status(self) -> Mapping[LinkId, LinkStatus]:
        """Every switch-to-switch link with its liveness."""
        return self._monitor.status()

    async def _send_probes(self, switch: str, sequence: int) -> None:
        ports = self._ports[switch]
        handle = self.topology.switch(switch)
        ttl = self.settings.probe_ttl_s
        frames = [
            (
                port,
                encode_probe(Probe(switch, port, self.nonce, sequence), handle.port_mac(port), ttl),
            )
            for port in ports
        ]
        # Recorded before sending: a probe may come back (another task) before the send returns.
        at = self.clock.monotonic()
        counted = []
        for port in ports:
            link = self.topology.link_at(switch, port)
            if link is not None and self._counts_probes_to(link.far_end(switch).node, at):
                counted.append(Endpoint(switch, port))
                self._monitor.probe_sent(counted[-1], sequence, at)
        sent = await self.southbound.send_frames(switch, frames)
        self.stats.sent += sent
        if sent != len(frames):  # not sent (channel lost): they cannot be missed
            for sender in counted:
                self._monitor.probe_withdrawn(sender, sequence)

    def _counts_probes_to(self, node: str, now: float) -> bool:
        """Whether a probe toward ``node`` that does not arrive is a miss (see module docs)."""
        view = self.views.get(node)
        if view is None:  # a host: not monitored anyway
            return True
        if view.in_service:
            return True
        if view.role is SwitchRole.PRIMARY:
            return False  # being reconciled: it takes probes once in service
        if view.ever_connected:
            return True  # lost: its links must go down
        if now - self.started_at < self.settings.startup_grace_s:
            return False
        self._monitor.mark_lost(node)  # never came: as good as lost
        return True

    def _note_unlisted(self, sender: Endpoint, receiver: Endpoint, now: float) -> None:
        key = LinkId.between(sender, receiver)
        seen = self.unlisted_links.get(key)
        if seen is not None:
            seen.last_seen = now
            seen.probes += 1
            return
        self.unlisted_links[key] = UnlistedLink(sender, receiver, now, now)
        listed = self.topology.link_at(receiver.node, receiver.port)
        self.log.emit(
            "unlisted_link",
            sender=str(sender),
            receiver=str(receiver),
            listed_at_receiver=None if listed is None else str(listed.id),
        )

    def _log_malformed(self, switch: str, port: int, reason: str) -> None:
        entry = self._malformed.setdefault(switch, _MalformedLog())
        now = self.clock.monotonic()
        if now - entry.last_logged < MALFORMED_LOG_INTERVAL_S:
            entry.suppressed += 1
            return
        self.log.emit(
            "malformed_probe",
            switch=switch,
            port=port,
            reason=reason,
            suppressed_since_last=entry.suppressed,
        )
        entry.last_logged = now
        entry.suppressed = 0
