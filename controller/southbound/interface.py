"""The southbound interface: what the controller needs from any switch target.

Target-neutral on purpose: intents go in, events and counters come out, and nothing here names
P4, gRPC or BMv2. The P4Runtime southbound (:mod:`controller.southbound.p4runtime`) is one
implementation; a Linux-kernel switch would be another, with the same controller on top.

A southbound connects to every switch and reports, through :class:`SouthboundEvents`, when it
may program one (it holds the primary role and the switch runs the right pipeline), when it lost
that right, every link probe a switch hands up, and (targets that report it) each port's
carrier. ``program()`` makes a switch hold an intent:
it diffs against what the switch holds (read back from the switch when asked, or when unknown)
and writes the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from controller.intent.model import SwitchIntent


class SouthboundError(Exception):
    """A southbound request could not be served (switch unknown, unreachable, refused)."""


class SwitchRole(StrEnum):
    """This controller's standing on a switch."""

    PRIMARY = "primary"
    BACKUP = "backup"


class LinkEvidence(StrEnum):
    """What tells the controller that a link is up or down: each target declares which it
    gives (``controller.targets``)."""

    #: LLDP probes sent through ``send_frames`` and handed up by ``frame_received``.
    PROBES = "probes"
    #: The carrier of the switch ports, reported by ``port_status``.
    CARRIER = "carrier"


class SouthboundEvents(Protocol):
    """Callbacks from a southbound to the controller; called on the event loop, must not block."""

    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        """The channel to ``switch`` is up with ``role`` (again called on every role change).

        As PRIMARY the switch runs the controller's pipeline and may be programmed; what it
        holds is unknown (a restart, another controller), so the next program reads it back.
        """
        ...

    def switch_disconnected(self, switch: str) -> None:
        """The channel to ``switch`` is gone; the southbound keeps trying to reconnect."""
        ...

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        """A link probe (LLDP frame) arrived on ``port`` of ``switch``."""
        ...

    def port_status(self, switch: str, port: int, up: bool) -> None:
        """``port`` of ``switch`` gained (``up``) or lost its carrier.

        Only a southbound whose targets report their ports' carrier calls it (the linux one,
        from netlink link events): for every port on connecting, before ``switch_connected``,
        then on every change. The P4Runtime southbound never does; its links are found by
        probes.
        """
        ...


@dataclass(frozen=True)
class EntityFailure:
    """One entity the switch refused, described for a log line."""

    entity: str
    error: str


@dataclass(frozen=True)
class ProgramResult:
    """What one ``program()`` call did on one switch."""

    switch: str
    #: Whether the switch's state was read back and diffed (else the southbound's record of
    #: what it wrote was used).
    read_back: bool = False
    inserts: int = 0
    modifies: int = 0
    deletes: int = 0
    requests: int = 0
    queue_commands: int = 0
    failures: tuple[EntityFailure, ...] = ()
    #: Things noticed but not fatal (e.g. read-back entities the controller does not model and
    #: therefore leaves alone).
    warnings: tuple[str, ...] = ()
    #: A failure of the call as a whole (not primary, channel lost, read failed), else None.
    error: str | None = None
    #: False when the switch is not ours to program now (channel down, backup role): retrying
    #: is pointless until the southbound reports it connected as primary again.
    ours: bool = True
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        """The switch now holds the intent."""
        return self.error is None and not self.failures

    @property
    def writes(self) -> int:
        """Entity updates applied."""
        return self.inserts + self.modifies + self.deletes


@dataclass(frozen=True)
class PortCounters:
    """Packets and bytes received and sent on one port, plus its drops and trims."""

    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    drops: int = 0
    trims: int = 0
    ecn_marks: int = 0


@dataclass(frozen=True)
class MemberCounters:
    """Packets and bytes hashed onto one next-hop member."""

    packets: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class SwitchCounters:
    """Counters of one switch, by port and by member index."""

    ports: Mapping[int, PortCounters] = field(default_factory=dict)
    members: Mapping[int, MemberCounters] = field(default_factory=dict)
    #: What the target cannot count, one sentence each (e.g. no per-member counters in a
    #: Linux kernel): an empty ``members`` then means "not counted", not "nothing hashed".
    not_counted: tuple[str, ...] = ()


class Southbound(Protocol):
    """A way to program and observe a fabric's switches."""

    async def run(self, events: SouthboundEvents) -> None:
        """Connect to every switch and keep the connections (reconnecting as needed) until
        cancelled, reporting through ``events``."""
        ...

    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        """Make the switch named by ``intent`` hold it, writing only the difference.

        Never raises for switch-side problems: they come back in the result.
        """
        ...

    async def send_frames(self, switch: str, frames: Sequence[tuple[int, bytes]]) -> int:
        """Send each (port, frame) out of that port of ``switch``; returns how many went out."""
        ...

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        """Current counters of ``ports`` and of the members with these indexes on ``switch``.

        Raises :class:`SouthboundError` when the switch cannot be read.
        """
        ...
