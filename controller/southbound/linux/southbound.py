"""The linux southbound: every switch of a fabric as a network namespace forwarding in the
kernel, programmed over netlink.

A switch is *connected* while its namespace exists: the southbound opens it (waiting for it
to appear), writes the forwarding sysctls (:mod:`.sysctls`), reports every port's carrier and
then ``switch_connected(PRIMARY)`` (netlink has no arbitration: whoever can open the namespace
may program it). With a ``primary_lock`` (a backup controller runs beside this one) the role is
whether this process holds that lock (:mod:`.primacy`): until it does, every switch is
connected as ``BACKUP``, its ports' carrier still reported so that the links and the intent
stay current, and ``program()`` refuses; once it does, every connected switch is reported
``PRIMARY`` again, and the fabric reconciles it (reads back, writes the difference).

A connected switch's ports' link events are followed; the connection is dropped when the
namespace's name goes away or points at another namespace (a runner tore the switch down or
made it anew), reporting ``switch_disconnected`` and waiting for it again.

``program()`` renders the intent (:mod:`.render`), diffs it against what the namespace holds
(:mod:`.diff`; read back on the first program of a connection, when asked, and after any
failed write, else this southbound's record of what it wrote) and writes the difference. What
has no kernel rendering (DSCP classes, LLDP, trimming, ECN on an unshaped port or without
red/codel/fq_codel, the priority queue) comes back as warnings, once per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyroute2.netlink.exceptions import NetlinkError

from controller.intent.model import SwitchIntent
from controller.southbound.interface import (
    ProgramResult,
    SouthboundError,
    SouthboundEvents,
    SwitchCounters,
    SwitchRole,
)
from controller.southbound.linux.diff import plan_changes
from controller.southbound.linux.ecn import ECN_QDISC_PREFERENCE
from controller.southbound.linux.names import namespace_of, port_interface
from controller.southbound.linux.namespace import LinkWatch, PortLink, SwitchNamespace
from controller.southbound.linux.primacy import PrimacyLock
from controller.southbound.linux.render import render
from controller.southbound.linux.state import KernelState
from controller.southbound.linux.sysctls import apply_sysctls, forwarding_sysctls
from hostenv.qdiscs import probe_qdiscs

#: The qdiscs that could mark ECN, as :func:`hostenv.qdiscs.probe_qdiscs` names them.
ECN_QDISCS = ECN_QDISC_PREFERENCE

NOT_COUNTED = (
    "members: the kernel keeps no per-next-hop counters (ports only)",
    "trims: the linux target does not trim",
    "ecn_marks: not counted on the linux target (the marking qdisc's statistics are not read)",
)


@dataclass(frozen=True)
class LinuxOptions:
    """How the southbound finds and watches the switches' namespaces."""

    #: Namespaces are named ``<prefix>-<switch>``; '' means just the switch's name.
    netns_prefix: str = ""
    #: How often a missing namespace is looked for again.
    reconnect_interval_s: float = 0.5
    #: How often a connected namespace's name is checked (it may be removed or replaced).
    presence_interval_s: float = 0.5
    #: Render queue rates and depths as tbf (False: leave the ports' qdiscs alone).
    shapers: bool = True
    #: A lock file shared with another controller: only its holder writes (None: always us).
    primary_lock: Path | None = None


@dataclass
class _Connection:
    namespace: SwitchNamespace
    watch: LinkWatch
    ports: dict[int, PortLink]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: What the namespace holds as far as this southbound knows (None: read it back).
    held: KernelState | None = None
    warned: bool = False


class LinuxSouthbound:
    """Kernel switches in network namespaces (see the module docs)."""

    def __init__(self, switches: Sequence[str], options: LinuxOptions | None = None) -> None:
        self._switches = tuple(switches)
        self._options = options or LinuxOptions()
        self._connections: dict[str, _Connection] = {}
        #: ECN-capable qdiscs the kernel offers (None: not probed, or the probe failed).
        self._ecn_qdiscs: frozenset[str] | None = None
        lock = self._options.primary_lock
        self._primacy = PrimacyLock(lock) if lock is not None else None

    @property
    def primary(self) -> bool:
        """Whether this controller may write (it holds the lock, or there is none)."""
        return self._primacy is None or self._primacy.held

    def _role(self) -> SwitchRole:
        return SwitchRole.PRIMARY if self.primary else SwitchRole.BACKUP

    def namespace(self, switch: str) -> str:
        """The namespace ``switch`` lives in."""
        return namespace_of(self._options.netns_prefix, switch)

    # -- Southbound ----------------------------------------------------------------------------
    async def run(self, events: SouthboundEvents) -> None:
        """Keep every switch connected until cancelled."""
        self._ecn_qdiscs = await _probe_ecn_qdiscs()
        keepers = [asyncio.create_task(self._keep(name, events)) for name in self._switches]
        if self._primacy is not None:
            keepers.append(asyncio.create_task(self._take_over(self._primacy, events)))
        try:
            await asyncio.gather(*keepers)
        finally:
            # Each keeper closes its own connection as it unwinds: wait for all of them, so
            # that nothing is closed twice or left open when run() returns.
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)
            if self._primacy is not None:
                self._primacy.release()

    async def _take_over(self, lock: PrimacyLock, events: SouthboundEvents) -> None:
        """Wait for the lock, then become primary on every connected switch (a switch that
        connects later is reported primary by its keeper)."""
        await lock.acquire()
        for switch in self._switches:
            if switch in self._connections:
                events.switch_connected(switch, SwitchRole.PRIMARY)

    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        """Make the namespace of ``intent.switch`` hold it, writing only the difference."""
        started = time.monotonic()
        switch = intent.switch
        connection = self._connections.get(switch)
        if connection is None:
            return ProgramResult(
                switch, error=f"namespace {self.namespace(switch)} not connected", ours=False
            )
        if not self.primary:
            return ProgramResult(switch, error="not primary", ours=False)
        async with connection.lock:
            rendering = render(intent, ecn_qdiscs=self._ecn_qdiscs)
            reading = read_back or connection.held is None
            try:
                held = connection.held
                if reading or held is None:
                    held = await connection.namespace.read_state(connection.ports)
                wanted = rendering.state
                if not self._options.shapers:
                    wanted = replace(wanted, shapers=held.shapers)
                plan = plan_changes(wanted, held)
                requests, failures = await connection.namespace.apply(plan, connection.ports)
            except Exception as error:  # netlink or OS errors: the call fails, nothing raises
                connection.held = None
                return ProgramResult(
                    switch,
                    read_back=reading,
                    error=f"{type(error).__name__}: {error}",
                    elapsed_s=time.monotonic() - started,
                )
            connection.held = None if failures else wanted
            warnings: list[str] = []
            if not connection.warned:
                warnings += _mac_mismatches(intent, connection.ports)
                warnings += rendering.unsupported
                connection.warned = True
            return ProgramResult(
                switch,
                read_back=reading,
                inserts=plan.inserts,
                modifies=plan.modifies,
                deletes=plan.deletes,
                requests=requests,
                queue_commands=plan.shaper_changes,
                failures=tuple(failures),
                warnings=tuple(warnings),
                elapsed_s=time.monotonic() - started,
            )

    async def send_frames(self, switch: str, frames: Sequence[tuple[int, bytes]]) -> int:
        """Refused: the linux target watches links by carrier and sends no probes."""
        raise SouthboundError(
            f"{switch}: sending frames is not supported on the linux target "
            "(links are watched by carrier, not LLDP)"
        )

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        """Per-interface counters of ``ports``; no member counters (the kernel has none)."""
        connection = self._connections.get(switch)
        if connection is None:
            raise SouthboundError(f"namespace {self.namespace(switch)} not connected")
        try:
            async with connection.lock:
                counters = await connection.namespace.counters(connection.ports)
        except Exception as error:
            raise SouthboundError(f"{switch}: cannot read counters: {error}") from error
        return SwitchCounters(
            ports={port: counters[port] for port in ports if port in counters},
            members={},
            not_counted=NOT_COUNTED,
        )

    # -- connections ---------------------------------------------------------------------------
    async def _keep(self, switch: str, events: SouthboundEvents) -> None:
        name = self.namespace(switch)
        while True:
            try:
                connection = await self._connect(name)
            except (SouthboundError, OSError, NetlinkError):  # not there yet, or going
                await asyncio.sleep(self._options.reconnect_interval_s)
                continue
            for port, link in sorted(connection.ports.items()):
                events.port_status(switch, port, link.up)
            self._connections[switch] = connection
            events.switch_connected(switch, self._role())
            try:
                await self._follow(switch, connection, events)
            finally:
                self._connections.pop(switch, None)
                _close(connection)
            events.switch_disconnected(switch)

    async def _connect(self, name: str) -> _Connection:
        namespace = await SwitchNamespace.open(name)
        try:
            watch = await LinkWatch.open(name)
        except BaseException:
            namespace.close()
            raise
        try:
            ports = await namespace.ports()
            interfaces = [port_interface(port) for port in sorted(ports)]
            await apply_sysctls(name, forwarding_sysctls(interfaces))
        except BaseException:
            namespace.close()
            watch.close()
            raise
        return _Connection(namespace, watch, ports)

    async def _follow(self, switch: str, connection: _Connection, events: SouthboundEvents) -> None:
        """Report the ports' changes until the namespace is gone (or the watch fails)."""

        async def follow_links() -> None:
            async with contextlib.aclosing(connection.watch.events()) as links:
                async for link in links:
                    before = connection.ports.get(link.port)
                    connection.ports[link.port] = link
                    if before is None or before.up != link.up:
                        events.port_status(switch, link.port, link.up)

        follower = asyncio.create_task(follow_links())
        try:
            while not follower.done() and connection.namespace.still_there():
                await asyncio.wait({follower}, timeout=self._options.presence_interval_s)
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower


def _close(connection: _Connection) -> None:
    connection.namespace.close()
    connection.watch.close()


def _mac_mismatches(intent: SwitchIntent, ports: Mapping[int, PortLink]) -> list[str]:
    """Ports whose interface MAC is not the one the topology gives them: the kernel sends with
    the interface's MAC, and hosts and neighbours expect the topology's."""
    notes = []
    for member in intent.members:
        link = ports.get(member.egress_port)
        if link is not None and link.mac != member.src_mac.lower():
            notes.append(
                f"{port_interface(member.egress_port)} has MAC {link.mac}, the topology gives "
                f"port {member.egress_port} {member.src_mac}"
            )
    return notes


async def _probe_ecn_qdiscs() -> frozenset[str] | None:
    """Which ECN-capable qdiscs the kernel offers; None when the probe itself failed."""
    try:
        offered = await asyncio.to_thread(probe_qdiscs)
    except (OSError, subprocess.SubprocessError):  # no root, no ip, a hung probe command
        return None
    return frozenset(name for name in ECN_QDISCS if offered.get(name))
