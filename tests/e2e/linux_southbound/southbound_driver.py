"""Runs a :class:`LinuxSouthbound` for a test and records what it reports."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from controller.southbound.interface import SwitchRole
from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound

WAIT_S = 10.0


@dataclass
class RecordedEvents:
    """Every callback of the southbound, in order."""

    connected: list[tuple[str, SwitchRole]] = field(default_factory=list)
    disconnected: list[str] = field(default_factory=list)
    port_changes: list[tuple[str, int, bool]] = field(default_factory=list)

    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        self.connected.append((switch, role))

    def switch_disconnected(self, switch: str) -> None:
        self.disconnected.append(switch)

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        raise AssertionError("the linux southbound hands up no frames")

    def port_status(self, switch: str, port: int, up: bool) -> None:
        self.port_changes.append((switch, port, up))

    def connected_switches(self) -> set[str]:
        """Switches whose latest connection event is a connect."""
        state: dict[str, bool] = {}
        for switch, _ in self.connected:
            state[switch] = True
        for switch in self.disconnected:
            state[switch] = False
        return {switch for switch, up in state.items() if up}


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
    """Poll ``condition`` until it holds; the seconds it took. AssertionError on timeout."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@contextlib.asynccontextmanager
async def running_southbound(
    switches: Sequence[str], prefix: str, *, wait_connected: bool = True
) -> AsyncIterator[tuple[LinuxSouthbound, RecordedEvents]]:
    """The southbound running for ``switches`` (connected to all of them, unless told not to
    wait), cancelled on exit."""
    southbound = LinuxSouthbound(
        switches, LinuxOptions(netns_prefix=prefix, presence_interval_s=0.1)
    )
    events = RecordedEvents()
    task = asyncio.create_task(southbound.run(events))
    try:
        if wait_connected:
            await wait_until(
                lambda: events.connected_switches() == set(switches), "every switch connected"
            )
        yield southbound, events
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
