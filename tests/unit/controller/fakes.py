"""Fakes for the southbound and running-controller tests: a clock, an event loop on that
clock, an event sink, a fabric.

``run_on_clock`` runs a coroutine on an event loop whose time is a ``FakeClock``: a timer (an
``asyncio.sleep``, a ``call_later``) fires when the clock reaches it, and when every task waits
for a timer the clock jumps to the earliest one at once. What happens, and in which order,
depends only on the timers' deadlines, never on how busy the machine is.

``FakeFabric`` is a southbound without switches: ``program()`` records what it was asked,
``send_frames()`` carries each probe across the topology's links (unless the test cut the link
or rewired a port) straight into the controller's ``frame_received``, as the P4 program's
packet-out / LLDP punt would.
"""

from __future__ import annotations

import asyncio
import io
import json
import selectors
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

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


T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that never sleeps on a timer: where the loop would wait ``timeout`` seconds
    for its next timer, it polls and, with nothing ready, advances the clock by ``timeout``
    (``timeout`` None, no timer pending: it waits for real input as usual)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(None if timeout is None else 0)
        if not ready and timeout is not None and timeout > 0:
            self._clock.advance(timeout)
        return ready


class _FakeClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is ``clock`` (see the module docs)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(_JumpingSelector(clock))
        self._fake_clock = clock

    def time(self) -> float:
        return self._fake_clock.monotonic()


def run_on_clock(clock: FakeClock, main: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(main())`` with every timer on ``clock`` (see the module docs)."""

    async def wrapped() -> T:
        return await main()

    with asyncio.Runner(loop_factory=lambda: _FakeClockLoop(clock)) as runner:
        return runner.run(wrapped())


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
    #: Switches whose every program fails, with this error, until the test removes them.
    failing: dict[str, str] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)

    async def run(self, events: SouthboundEvents) -> None:
        self.events = events

    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        self.programs.append((intent.switch, read_back))
        error = self.fail_next.pop(intent.switch, None) or self.failing.get(intent.switch)
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
