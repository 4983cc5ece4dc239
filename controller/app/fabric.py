"""The running controller: intent from topology and link state, kept on every switch.

It ties the pieces together and owns the decisions:

* a switch where we become primary is *reconciled*: read back, diffed against the intent,
  the difference written (never wiped), then it is *in service*;
* link probes go out of every in-service switch each interval and are read back at the
  neighbour (:mod:`controller.app.lldp`, :mod:`controller.app.liveness`); probes seen at a port
  the topology does not join to the sender are reported, never used;
* on a target that reports its ports' carrier (the linux southbound's ``port_status``), links
  are watched by carrier instead of probes (:mod:`controller.app.carrier`), with the same
  link events, recomputation and failover records;
* on a link change the intent is recomputed as the routing policy says
  (:mod:`controller.intent.policy`): ``reactive`` recomputes the whole fabric at once, ``static``
  only prunes each switch's own dead next hops, ``converge:SECONDS`` prunes at once and
  recomputes the fabric SECONDS later; only the switches whose intent changed are programmed,
  each with only its difference; the time from the first lost probe to the last acknowledged
  write is recorded as the failover (one record per phase: ``reactive``, ``local``,
  ``converged``);
* every event goes to the structured event log, and no switch-side error ends the loop.

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
import secrets
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.app.carrier import CarrierMonitor
from controller.app.clock import Clock, SystemClock
from controller.app.eventlog import EventLog
from controller.app.failover import Failover
from controller.app.liveness import LinkChange, LinkMonitor, LinkState, LinkStatus
from controller.app.lldp import ForeignLldp, Probe, ProbeDecodeError, decode_probe, encode_probe
from controller.app.programmer import IntentSource, RetryPolicy, SwitchProgrammer
from controller.intent import (
    FabricIntent,
    RoutingMode,
    RoutingPolicy,
    compute_intent,
    diff_intents,
    prune_dead_next_hops,
)
from controller.intent.model import SwitchIntent
from controller.southbound.interface import ProgramResult, Southbound, SwitchRole
from topologies.model import Endpoint, LinkId, Topology
from topologies.paths import PathMode

#: A failover whose switches are not all programmed by then is recorded as incomplete.
FAILOVER_WAIT_S = 30.0
#: How long a probe may be under way before it can count as missed, in probe intervals: a
#: BMv2 on a busy machine hands probes up 10-20 ms late at times.
FLIGHT_INTERVALS = 2
#: Silence (no probe handed up at all) that counts as a dead switch: intervals, and a floor. A
#: lost channel (the usual way a switch dies) does not wait for it; stalls of 100 ms and more
#: happen when a small machine runs many BMv2s, so it is generous.
SILENCE_INTERVALS = 50
MIN_SILENCE_S = 0.500
#: At most one log line per switch about malformed probes in this many seconds.
MALFORMED_LOG_INTERVAL_S = 1.0


class LinkEvidence(StrEnum):
    """What tells the controller that a link is up or down."""

    #: LLDP probes sent and received through the switches (P4Runtime targets).
    PROBES = "probes"
    #: The carrier of the switch ports, reported by the southbound (linux target).
    CARRIER = "carrier"


@dataclass(frozen=True)
class DiscoverySettings:
    """Link discovery: probe interval, misses that mean down, and whom to probe."""

    enabled: bool = True
    evidence: LinkEvidence = LinkEvidence.PROBES
    interval_s: float = 0.010
    miss_limit: int = 3
    #: How long a probe may take to arrive before it can count as missed.
    flight_allowance_s: float = 0.020
    #: How long a switch may hand up no probe at all before probes toward it count as missed
    #: without newer ones arriving (see :mod:`controller.app.liveness`).
    silence_s: float = 0.500
    probe_host_ports: bool = True
    #: After the controller starts, how long a switch that never connected has before the
    #: probes toward it count as missed (then its links go down).
    startup_grace_s: float = 10.0

    @property
    def probe_ttl_s(self) -> int:
        """LLDP TTL advertised in probes: how long the information stays valid."""
        return max(1, math.ceil(self.interval_s * self.miss_limit))


@dataclass
class SwitchView:
    """What the controller knows about one switch."""

    role: SwitchRole | None = None
    in_service: bool = False
    #: Whether its channel was ever up since the controller started.
    ever_connected: bool = False
    last_result: ProgramResult | None = None
    last_ok_result: ProgramResult | None = None


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


@dataclass
class FabricController:
    """Keeps a fabric programmed with the intent of its topology and live links."""

    topology: Topology
    southbound: Southbound
    log: EventLog
    discovery: DiscoverySettings = field(default_factory=DiscoverySettings)
    clock: Clock = field(default_factory=SystemClock)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Identifies this controller instance's probes (another instance's are ignored).
    nonce: int = field(default_factory=lambda: secrets.randbits(32))
    #: When link changes reach the switches beyond the link's two ends.
    routing: RoutingPolicy = field(default_factory=RoutingPolicy)
    #: How EVs pick paths: the exact modes add static tables no link change recomputes.
    path_mode: PathMode = PathMode.ECMP
    views: dict[str, SwitchView] = field(init=False)
    intent: FabricIntent = field(init=False)
    generation: int = field(init=False, default=0)
    probe_stats: ProbeStats = field(init=False, default_factory=ProbeStats)
    unlisted_links: dict[LinkId, UnlistedLink] = field(init=False, default_factory=dict)
    last_failover: Failover | None = field(init=False, default=None)
    started_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock.monotonic()
        self.views = {switch.name: SwitchView() for switch in self.topology.switches}
        self.intent = compute_intent(self.topology, path_mode=self.path_mode)
        self._down: set[LinkId] = set()
        #: The down links the fabric-wide computation knows of, and its result (before each
        #: switch prunes its own dead next hops): never any under ``static``.
        self._routed_down: frozenset[LinkId] = frozenset()
        self._routed: FabricIntent = self.intent
        self._routed_key: frozenset[LinkId] = frozenset()
        #: Link changes so far, and the newest one a ``converge`` recomputation has applied.
        self._changes_seen = 0
        self._changes_converged = 0
        self._monitor = LinkMonitor(
            self.topology.links,
            self.discovery.miss_limit,
            self.discovery.flight_allowance_s,
            self.discovery.silence_s,
        )
        self._probe_ports = {
            switch.name: tuple(
                port
                for port in self.topology.switch_ports(switch.name)
                if self.discovery.probe_host_ports
                or self._monitor.monitors(Endpoint(switch.name, port))
            )
            for switch in self.topology.switches
        }
        self._carrier = CarrierMonitor(self.topology.all_links, self.views.keys())
        self._sequence = 0
        self._programmers = {
            name: SwitchProgrammer(
                name,
                self._intent_source(name),
                self._program_call,
                self._on_result,
                self.retry,
            )
            for name in self.views
        }
        self._malformed: dict[str, _MalformedLog] = {}
        self._background: set[asyncio.Task[Any]] = set()

    # -- running -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run until cancelled: the southbound, one programmer per switch, the probe loop."""
        self.log.emit(
            "controller_started",
            topology=self.topology.name,
            switches=list(self.views),
            discovery=self.discovery.enabled,
            link_evidence=str(self.discovery.evidence),
            probe_interval_ms=round(self.discovery.interval_s * 1000, 3),
            miss_limit=self.discovery.miss_limit,
            routing=str(self.routing),
            path_mode=str(self.path_mode),
            nonce=self.nonce,
        )
        workers: list[Coroutine[Any, Any, None]] = [
            self.southbound.run(self),
            self.run_programmers(),
        ]
        if self._watches(LinkEvidence.PROBES):
            workers.append(self._probe_loop())
        if self._watches(LinkEvidence.CARRIER):
            workers.append(self._carrier_grace())
        tasks = [asyncio.create_task(worker) for worker in workers]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in (*tasks, *self._background):
                task.cancel()
            await asyncio.gather(*tasks, *self._background, return_exceptions=True)
            self.log.emit("controller_stopped")

    async def run_programmers(self) -> None:
        """Only the per-switch programmers, until cancelled (``run`` starts them; a driver that
        connects switches and ticks probes itself, like a test or a simulation, uses this)."""
        await asyncio.gather(*(programmer.run() for programmer in self._programmers.values()))

    def link_status(self) -> Mapping[LinkId, LinkStatus]:
        """Every watched link with its liveness: the switch-to-switch links with probes, every
        link (host links too) with carrier."""
        if self._watches(LinkEvidence.CARRIER):
            return self._carrier.status()
        return self._monitor.status()

    def down_links(self) -> frozenset[LinkId]:
        """The links that are down (each switch prunes its own next hops over them)."""
        return frozenset(self._down)

    def routed_down_links(self) -> frozenset[LinkId]:
        """The down links the fabric-wide routes avoid: all of them under ``reactive``, none
        under ``static``, those of the policy's delay ago under ``converge``."""
        return self._routed_down

    def pending_convergences(self) -> int:
        """Link changes whose ``converge`` recomputation is still to come."""
        return self._changes_seen - self._changes_converged

    # -- southbound events ---------------------------------------------------------------------
    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        """Our channel to ``switch`` is up with ``role``: reconcile it when primary."""
        view = self.views.get(switch)
        if view is None:
            return
        self.log.emit("switch_connected", switch=switch, role=str(role))
        view.role = role
        view.ever_connected = True
        view.in_service = False
        programmer = self._programmers[switch]
        programmer.reset()
        if role is SwitchRole.PRIMARY:
            programmer.request(read_back=True)

    def switch_disconnected(self, switch: str) -> None:
        """Our channel to ``switch`` is down; the southbound reconnects on its own."""
        view = self.views.get(switch)
        if view is None:
            return
        self.log.emit("switch_disconnected", switch=switch)
        view.role = None
        view.in_service = False
        self._monitor.mark_lost(switch)
        self._programmers[switch].reset()
        if self._watches(LinkEvidence.CARRIER):
            self._apply_carrier(self._carrier.switch_lost(switch, self.clock.monotonic()))

    def port_status(self, switch: str, port: int, up: bool) -> None:
        """``port`` of ``switch`` gained or lost carrier: with carrier as the link evidence,
        its link follows (see :mod:`controller.app.carrier`)."""
        if switch not in self.views:
            return
        self.log.emit("port_status", switch=switch, port=port, up=up)
        if self._watches(LinkEvidence.CARRIER):
            changes = self._carrier.port_status(switch, port, up, self.clock.monotonic())
            self._apply_carrier(changes)

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        """A probe came up from ``port`` of ``switch``: feed liveness, or count why not."""
        stats = self.probe_stats
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

    # -- carrier -------------------------------------------------------------------------------
    def _watches(self, evidence: LinkEvidence) -> bool:
        return self.discovery.enabled and self.discovery.evidence is evidence

    def _apply_carrier(self, changes: list[LinkChange]) -> None:
        if changes:
            self._apply_link_changes(changes)

    async def _carrier_grace(self) -> None:
        """A switch that has not connected within the startup grace is as good as lost (as
        with probes): its links go down and the fabric routes around it."""
        await asyncio.sleep(self.discovery.startup_grace_s)
        now = self.clock.monotonic()
        for name, view in self.views.items():
            if not view.ever_connected:
                self._apply_carrier(self._carrier.switch_lost(name, now))

    # -- probing -------------------------------------------------------------------------------
    async def probe_tick(self) -> list[LinkChange]:
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
            self._apply_link_changes(changes)
        return changes

    async def _probe_loop(self) -> None:
        interval = self.discovery.interval_s
        deadline = self.clock.monotonic()
        while True:
            try:
                await self.probe_tick()
            except Exception as error:  # a bug here must not stop liveness for good
                self.log.emit("internal_error", where="probe_tick", error=repr(error))
            deadline += interval
            now = self.clock.monotonic()
            if deadline < now:  # fell behind: skip the missed rounds rather than burst
                deadline = now
            await asyncio.sleep(deadline - now)

    async def _send_probes(self, switch: str, sequence: int) -> None:
        ports = self._probe_ports[switch]
        handle = self.topology.switch(switch)
        ttl = self.discovery.probe_ttl_s
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
        self.probe_stats.sent += sent
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
        if now - self.started_at < self.discovery.startup_grace_s:
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

    # -- reacting to link changes --------------------------------------------------------------
    def _apply_link_changes(self, changes: list[LinkChange]) -> None:
        detected_at = self.clock.monotonic()
        for change in changes:
            if change.state is LinkState.DOWN:
                self._down.add(change.link)
            else:
                self._down.discard(change.link)
            self.log.emit(
                f"link_{change.state}",
                link=str(change.link),
                since_ms=round((detected_at - change.since) * 1000, 3),
            )
        downs = [c.since for c in changes if c.state is LinkState.DOWN]
        started_at = min(downs) if downs else max(c.since for c in changes)
        trigger = tuple(f"{change.link} {change.state}" for change in changes)
        mode = self.routing.mode
        if mode is RoutingMode.REACTIVE:
            self._routed_down = frozenset(self._down)
        elif mode is RoutingMode.CONVERGE:
            self._changes_seen += 1
            self._spawn(
                self._converge_later(
                    self._changes_seen, frozenset(self._down), trigger, started_at, detected_at
                )
            )
        phase = "reactive" if mode is RoutingMode.REACTIVE else "local"
        self._reprogram(trigger, started_at, detected_at, phase)

    async def _converge_later(
        self,
        sequence: int,
        down: frozenset[LinkId],
        trigger: tuple[str, ...],
        started_at: float,
        detected_at: float,
    ) -> None:
        """After the policy's delay, let the fabric-wide routes see the link state ``down`` as
        it was after change ``sequence``, unless a later change was applied already."""
        await asyncio.sleep(self.routing.delay_s)
        if sequence <= self._changes_converged:
            return
        self._changes_converged = sequence
        self._routed_down = down
        self._reprogram(trigger, started_at, detected_at, "converged")

    def _reprogram(
        self, trigger: tuple[str, ...], started_at: float, detected_at: float, phase: str
    ) -> None:
        """The intent for the current routed and live link state; program what changed."""
        if self._routed_down != self._routed_key:
            self._routed = compute_intent(self.topology, self._routed_down, self.path_mode)
            self._routed_key = self._routed_down
        new_intent = prune_dead_next_hops(self._routed, self.topology, self._down)
        changed = tuple(
            intent.switch
            for intent in new_intent.switches
            if intent != self.intent.switch(intent.switch)
        )
        diff = diff_intents(self.intent, new_intent)
        self.intent = new_intent
        self.generation += 1
        self.log.emit(
            "intent_changed",
            generation=self.generation,
            phase=phase,
            routing=str(self.routing),
            switches=list(changed),
            changes=diff.change_count,
            down_links=sorted(str(link) for link in self._down),
            routed_down_links=sorted(str(link) for link in self._routed_down),
        )
        for name in changed:
            self._programmers[name].request()
        targets = tuple(name for name in changed if self.views[name].in_service)
        self._spawn(self._time_failover(trigger, started_at, detected_at, targets, phase))

    async def _time_failover(
        self,
        trigger: tuple[str, ...],
        started_at: float,
        detected_at: float,
        targets: tuple[str, ...],
        phase: str,
    ) -> None:
        generation = self.generation
        waits = [self._programmers[name].wait_applied(generation) for name in targets]
        complete = True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), FAILOVER_WAIT_S)
        except TimeoutError:
            complete = False
        programmed_at = self.clock.monotonic()
        writes = 0
        for name in targets:
            result = self.views[name].last_ok_result
            writes += result.writes if result is not None else 0
        record = Failover(
            trigger, started_at, detected_at, programmed_at, targets, writes, complete, phase
        )
        self.last_failover = record
        self.log.emit("failover", generation=generation, **record.to_json())

    # -- programming ---------------------------------------------------------------------------
    def _intent_source(self, name: str) -> IntentSource:
        def source() -> tuple[int, SwitchIntent]:
            return self.generation, self.intent.switch(name)

        return source

    async def _program_call(self, intent: SwitchIntent, read_back: bool) -> ProgramResult:
        return await self.southbound.program(intent, read_back=read_back)

    def _on_result(self, result: ProgramResult, generation: int) -> None:
        view = self.views[result.switch]
        view.last_result = result
        self.log.emit(
            "program",
            switch=result.switch,
            generation=generation,
            ok=result.ok,
            read_back=result.read_back,
            inserts=result.inserts,
            modifies=result.modifies,
            deletes=result.deletes,
            requests=result.requests,
            queue_commands=result.queue_commands,
            elapsed_ms=round(result.elapsed_s * 1000, 3),
            error=result.error,
        )
        for failure in result.failures:
            self.log.emit(
                "write_failed", switch=result.switch, entity=failure.entity, error=failure.error
            )
        for warning in result.warnings:
            self.log.emit("program_warning", switch=result.switch, warning=warning)
        if not result.ok:
            return
        view.last_ok_result = result
        if view.role is SwitchRole.PRIMARY and not view.in_service:
            view.in_service = True
            self._monitor.mark_found(result.switch)
            self.log.emit("switch_in_service", switch=result.switch, generation=generation)
            if self._watches(LinkEvidence.CARRIER):
                found = self._carrier.switch_found(result.switch, self.clock.monotonic())
                self._apply_carrier(found)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def discovery_settings(
    topology: Topology,
    *,
    enabled: bool = True,
    evidence: LinkEvidence = LinkEvidence.PROBES,
    interval_ms: int | None = None,
    miss_limit: int | None = None,
    probe_host_ports: bool = True,
) -> DiscoverySettings:
    """Discovery settings: explicit values, else the topology's ``settings.lldp``.

    A probe may take two intervals to arrive before it can count as missed; a switch may be
    silent for 50 intervals (at least 500 ms) before silence alone counts.
    """
    interval_s = (interval_ms or topology.settings.lldp.interval_ms) / 1000
    return DiscoverySettings(
        enabled=enabled,
        evidence=evidence,
        interval_s=interval_s,
        miss_limit=miss_limit or topology.settings.lldp.miss_limit,
        flight_allowance_s=FLIGHT_INTERVALS * interval_s,
        silence_s=max(SILENCE_INTERVALS * interval_s, MIN_SILENCE_S),
        probe_host_ports=probe_host_ports,
    )
