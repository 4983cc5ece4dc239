"""The running controller: intent from topology and link state, kept on every switch.

It ties the pieces together and owns the decisions:

* a switch where we become primary is *reconciled*: read back, diffed against the intent,
  the difference written (never wiped), then it is *in service*;
* links are watched by probes out of every in-service switch each interval
  (:mod:`controller.app.probing`, which also says when a switch sends and takes them), or, on
  a target that reports its ports' carrier (the linux southbound's ``port_status``), by carrier
  (:mod:`controller.app.carrier`), with the same link events, recomputation and failover
  records;
* on a link change the intent is recomputed as the routing policy says
  (:mod:`controller.intent.policy`): ``reactive`` recomputes the whole fabric at once, ``static``
  only prunes each switch's own dead next hops, ``converge:SECONDS`` prunes at once and
  recomputes the fabric SECONDS later; only the switches whose intent changed are programmed,
  each with only its difference; the time from the first lost probe to the last acknowledged
  write is recorded as the failover (one record per phase: ``reactive``, ``local``,
  ``converged``);
* every event goes to the structured event log, and no switch-side error ends the loop.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.app.carrier import CarrierMonitor
from controller.app.clock import Clock, SystemClock
from controller.app.discovery import DiscoverySettings
from controller.app.eventlog import EventLog
from controller.app.failover import Failover
from controller.app.liveness import LinkChange, LinkState, LinkStatus
from controller.app.probing import LinkProber
from controller.app.programmer import IntentSource, RetryPolicy, SwitchProgrammer
from controller.app.switch_view import SwitchView
from controller.intent import (
    FabricIntent,
    RoutingMode,
    RoutingPolicy,
    compute_intent,
    diff_intents,
    prune_dead_next_hops,
)
from controller.intent.model import SwitchIntent
from controller.southbound.interface import LinkEvidence, ProgramResult, Southbound, SwitchRole
from topologies.model import LinkId, Topology
from topologies.paths import PathMode


def sorted_links(links: set[LinkId] | frozenset[LinkId]) -> list[LinkId]:
    """``links`` in a stable order (events and records come out the same each time)."""
    return sorted(links, key=str)


#: A failover whose switches are not all programmed by then is recorded as incomplete.
FAILOVER_WAIT_S = 30.0


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
    #: The probe loop; it sends nothing unless links are watched by probes.
    probes: LinkProber = field(init=False)
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
        self.probes = LinkProber(
            self.topology,
            self.southbound,
            self.discovery,
            self.views,
            self._apply_link_changes,
            log=self.log,
            clock=self.clock,
            nonce=self.nonce,
            started_at=self.started_at,
        )
        self._carrier = CarrierMonitor(self.topology.all_links, self.views.keys())
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
        if self.discovery.watches(LinkEvidence.PROBES):
            workers.append(self.probes.run())
        if self.discovery.watches(LinkEvidence.CARRIER):
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
        if self.discovery.watches(LinkEvidence.CARRIER):
            return self._carrier.status()
        return self.probes.status()

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
        self.probes.switch_lost(switch)
        self._programmers[switch].reset()
        if self.discovery.watches(LinkEvidence.CARRIER):
            self._apply_carrier(self._carrier.switch_lost(switch, self.clock.monotonic()))

    def port_status(self, switch: str, port: int, up: bool) -> None:
        """``port`` of ``switch`` gained or lost carrier: with carrier as the link evidence,
        its link follows (see :mod:`controller.app.carrier`)."""
        if switch not in self.views:
            return
        self.log.emit("port_status", switch=switch, port=port, up=up)
        if self.discovery.watches(LinkEvidence.CARRIER):
            changes = self._carrier.port_status(switch, port, up, self.clock.monotonic())
            self._apply_carrier(changes)

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        """A frame came up from ``port`` of ``switch``: a probe for the probe loop."""
        self.probes.frame_received(switch, port, frame)

    def peer_down_links(self, down: frozenset[LinkId]) -> None:
        """The down links as the fabric's other controller sees them, taken while this one is
        primary on no switch (a backup that cannot watch links itself: ``controller.app.peer``);
        its intent follows, so that a takeover finds the switches holding it."""
        if any(view.role is SwitchRole.PRIMARY for view in self.views.values()):
            return
        # Its own probes, once it is primary, must be able to bring these links back up.
        self.probes.assume_down(down)
        now = self.clock.monotonic()
        went, came = sorted_links(down - self._down), sorted_links(self._down - down)
        changes = [LinkChange(link, LinkState.DOWN, now, now) for link in went]
        changes += [LinkChange(link, LinkState.UP, now, now) for link in came]
        if changes:
            self._apply_link_changes(changes)

    # -- carrier -------------------------------------------------------------------------------
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
            self.probes.switch_found(result.switch)
            self.log.emit("switch_in_service", switch=result.switch, generation=generation)
            if self.discovery.watches(LinkEvidence.CARRIER):
                found = self._carrier.switch_found(result.switch, self.clock.monotonic())
                self._apply_carrier(found)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
