"""Fakes for the southbound and running-controller tests: a clock, an event sink, a fabric.

``FakeFabric`` is a southbound without switches: ``program()`` records what it was asked,
``send_frames()`` carries each probe across the topology's links (unless the test cut the link
or rewired a port) straight into the controller's ``frame_received``, as the P4 program's
packet-out / LLDP punt would.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.app.eventlog import EventLog
from controller.intent.model import SwitchIntent
from controller.southbound.interface import (
    MemberCounters,
    PortCounters,
    ProgramResult,
    SouthboundError,
    SouthboundEvents,
    SwitchCounters,
)
from topologies import Endpoint, Topology


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_800_000_000.0 + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class EventSink:
    """An EventLog writing to memory, with the events parsed back."""

    def __init__(self, clock: FakeClock) -> None:
        self.stream = io.StringIO()
        self.log = EventLog(self.stream, clock)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def named(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["event"] == name]


@dataclass
class FakeFabric:
    """A southbound over a simulated fabric (see the module docs)."""

    topology: Topology
    events: SouthboundEvents | None = None
    programs: list[tuple[str, bool]] = field(default_factory=list)
    intents: dict[str, SwitchIntent] = field(default_factory=dict)
    cut: set[frozenset[Endpoint]] = field(default_factory=set)
    #: Ports whose cable goes elsewhere than the topology says (None: nowhere).
    rewired: dict[Endpoint, Endpoint | None] = field(default_factory=dict)
    fail_next: dict[str, str] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)

    async def run(self, events: SouthboundEvents) -> None:
        self.events = events

    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        self.programs.append((intent.switch, read_back))
        error = self.fail_next.pop(intent.switch, None)
        if error is not None:
            return ProgramResult(intent.switch, read_back=read_back, error=error)
        self.intents[intent.switch] = intent
        return ProgramResult(intent.switch, read_back=read_back, modifies=1, requests=1)

    async def send_frames(self, switch: str, frames: Sequence[tuple[int, bytes]]) -> int:
        if switch in self.unreachable:
            return 0
        for port, frame in frames:
            sender = Endpoint(switch, port)
            receiver = self.rewired[sender] if sender in self.rewired else self._far_end(sender)
            if receiver is None or frozenset((sender, receiver)) in self.cut:
                continue
            if receiver.node in self.unreachable or self.topology.is_host(receiver.node):
                continue
            assert self.events is not None
            self.events.frame_received(receiver.node, receiver.port, frame)
        return len(frames)

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        if switch in self.unreachable:
            raise SouthboundError(f"{switch}: channel down")
        return SwitchCounters(
            ports={port: PortCounters(rx_packets=port, tx_packets=2 * port) for port in ports},
            members={index: MemberCounters(packets=index + 10) for index in members},
        )

    def _far_end(self, end: Endpoint) -> Endpoint | None:
        link = self.topology.link_at(end.node, end.port)
        return None if link is None else link.far_end(end.node)

    def cut_link(self, a: str, b: str) -> None:
        self.cut.add(frozenset(self._ends(a, b)))

    def restore_link(self, a: str, b: str) -> None:
        self.cut.discard(frozenset(self._ends(a, b)))

    def _ends(self, a: str, b: str) -> tuple[Endpoint, Endpoint]:
        (link,) = [link for link in self.topology.links if {link.a.node, link.b.node} == {a, b}]
        return link.a, link.b
