"""The P4Runtime southbound: every switch of a fabric through finsy, in one asyncio loop.

finsy's ``Controller`` keeps one channel per switch, reconnects after a restart or a lost
channel, runs arbitration with our election id, and on becoming primary pushes the pipeline
only when the switch's cookie differs from ours (so a controller restart or a take-over never
wipes a switch). Its ready handler is where this module learns that a switch may be programmed;
from then on every packet-in of that channel is handed to the controller.

What the switch holds is cached per channel session: the cache is dropped whenever the channel
comes up, goes down or changes role, and a ``program()`` without a cache reads the switch back
first. Writes go out in phased batches (:mod:`controller.southbound.plan`); refused updates are
reported with their entity, never raised.

Other P4Runtime targets reuse it whole: a :class:`ProgramAdapter` for a program whose names
differ from mrc.p4's, a device config already packed as bytes, and per-switch port maps
(:mod:`controller.southbound.device_ports`) applied at this edge (the ``tofino`` target).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import finsy as fy
import finsy.switch as finsy_switch
from finsy.p4client import P4ClientError

from controller.intent.model import SwitchIntent
from controller.southbound import p4_program as p4
from controller.southbound.device_ports import DevicePorts
from controller.southbound.finsy_codec import (
    FinsyEntity,
    UnmodelledEntity,
    from_entity,
    read_targets,
    to_update,
)
from controller.southbound.interface import (
    EntityFailure,
    MemberCounters,
    PortCounters,
    ProgramResult,
    SouthboundError,
    SouthboundEvents,
    SwitchCounters,
    SwitchRole,
)
from controller.southbound.mapping import desired_records
from controller.southbound.plan import Operation, Update, plan_writes
from controller.southbound.queues import QueueBackend, QueueOutcome
from controller.southbound.records import Record, RecordSet
from controller.southbound.writer import (
    DEFAULT_MAX_BATCH,
    BatchWriteError,
    SendBatch,
    execute_plan,
)

#: Packet-ins waiting for the controller before finsy drops them (probes arrive in bursts of
#: one per port per interval).
PACKET_IN_QUEUE = 4096

#: How long finsy waits before reconnecting after a connection attempt that failed within two
#: seconds. finsy's own 10 s is meant for unreachable devices; a restarted BMv2 accepts TCP a
#: moment before it can arbitrate, so the first attempt fails fast, and 10 s would then be
#: most of the switch's recovery time. finsy has no option for it; its module constant is set
#: when this southbound starts (checked by a unit test, so a finsy upgrade that renames it is
#: noticed).
RECONNECT_THROTTLE_S = 1.0

_SAME_PORTS = DevicePorts()
_PORT_COUNTERS = (p4.PORT_RX, p4.PORT_TX, p4.PORT_DROPS, p4.TRIMS, p4.ECN_MARKS)


@dataclass(frozen=True)
class SwitchEndpoint:
    """How to reach one switch over P4Runtime."""

    name: str
    address: str
    device_id: int


def _same_name(name: str) -> str:
    return name


@dataclass(frozen=True)
class ProgramAdapter:
    """How the intent meets the switch program: mrc.p4's entities as they are (the default),
    or a program that names or scales some of them otherwise (the TNA program)."""

    #: Every entity a switch must hold for an intent (ports already device ports).
    records: Callable[[SwitchIntent], RecordSet] = desired_records
    #: Wildcard reads returning everything the controller manages on a switch.
    read_targets: Callable[[], list[FinsyEntity]] = read_targets
    #: The program's name of an mrc.p4 counter.
    counter_name: Callable[[str], str] = _same_name


@dataclass(frozen=True)
class P4RuntimeOptions:
    """Pipeline, arbitration, transport security and batching for every switch."""

    p4info: Path = p4.P4INFO_PATH
    #: The device config pushed with the P4Info: a file (BMv2's JSON) or bytes packed for the
    #: target (``controller.southbound.tofino.device_config``).
    p4blob: Path | bytes = p4.P4BLOB_PATH
    election_id: int = 10
    credentials: fy.GRPCCredentialsTLS | None = None
    max_batch: int = DEFAULT_MAX_BATCH
    #: Work around PI's failure to remove a watched member from a group (see
    #: :mod:`controller.southbound.plan`); harmless, one extra write, on other servers.
    unwatch_departing: bool = True
    adapter: ProgramAdapter = field(default_factory=ProgramAdapter)


@dataclass
class _Session:
    """What the southbound knows of one switch's current channel session."""

    #: Bumped on every channel or role change; a write started in an older session must not
    #: store its result as what the switch holds.
    number: int = 0
    held: RecordSet | None = None


class P4RuntimeSouthbound:
    """:class:`~controller.southbound.interface.Southbound` over P4Runtime (finsy)."""

    def __init__(
        self,
        endpoints: Sequence[SwitchEndpoint],
        options: P4RuntimeOptions | None = None,
        queues: QueueBackend | None = None,
        device_ports: Mapping[str, DevicePorts] | None = None,
    ) -> None:
        self._options = options or P4RuntimeOptions()
        self._queues = queues
        #: Per switch, how its device numbers ports (hardware targets); absent: as the topology.
        self._device_ports = dict(device_ports or {})
        switch_options = fy.SwitchOptions(
            p4info=self._options.p4info,
            p4blob=self._options.p4blob,
            initial_election_id=self._options.election_id,
            channel_credentials=self._options.credentials,
            ready_handler=self._on_ready,
        )
        self._switches = {
            endpoint.name: fy.Switch(
                endpoint.name, endpoint.address, switch_options(device_id=endpoint.device_id)
            )
            for endpoint in endpoints
        }
        self._sessions = {name: _Session() for name in self._switches}
        self._locks: dict[str, asyncio.Lock] = {}
        self._events: SouthboundEvents | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self, events: SouthboundEvents) -> None:
        """Connect to every switch and keep the channels until cancelled."""
        self._events = events
        finsy_switch._FAIL_THROTTLE_SECS = RECONNECT_THROTTLE_S
        for switch in self._switches.values():
            switch.ee.on(fy.SwitchEvent.CHANNEL_DOWN, self._on_channel_down)
        await fy.Controller(self._switches.values()).run()

    async def _on_ready(self, switch: fy.Switch) -> None:
        """finsy's ready handler: the channel is up, arbitration done, pipeline in place.

        Runs as a task of the switch's session, cancelled when the channel or the role changes;
        as primary it lives on, handing every packet-in to the controller.
        """
        self._new_session(switch.name)
        role = SwitchRole.PRIMARY if switch.is_primary else SwitchRole.BACKUP
        if self._events is not None:
            self._events.switch_connected(switch.name, role)
        if role is not SwitchRole.PRIMARY:
            return
        ports = self._ports(switch.name)
        async for packet in switch.read_packets(queue_size=PACKET_IN_QUEUE):
            device_port = packet.metadata.get(p4.PACKET_IN_PORT)
            if not isinstance(device_port, int):
                continue
            port = ports.from_device(device_port)
            if self._events is not None and port is not None:
                self._events.frame_received(switch.name, port, packet.payload)

    def _on_channel_down(self, switch: fy.Switch) -> None:
        self._new_session(switch.name)
        if self._events is not None:
            self._events.switch_disconnected(switch.name)

    def _new_session(self, name: str) -> None:
        session = self._sessions[name]
        session.number += 1
        session.held = None
        if self._queues is not None:
            self._queues.forget(name)

    # -- programming ---------------------------------------------------------------------------
    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        """Diff the switch against ``intent`` and write the difference (see module docs)."""
        name = intent.switch
        started = time.monotonic()
        switch = self._switches.get(name)
        if switch is None:
            return ProgramResult(name, error=f"unknown switch {name!r}")
        async with self._lock(name):
            if not switch.is_up:
                return ProgramResult(name, error="channel down", ours=False)
            if not switch.is_primary:
                return ProgramResult(name, error="not primary", ours=False)
            session = self._sessions[name]
            number = session.number
            held = session.held
            warnings: tuple[str, ...] = ()
            did_read = held is None or read_back
            if held is None or read_back:
                try:
                    held, warnings = await self._read_held(switch)
                except Exception as error:  # any read failure: report, never raise
                    return ProgramResult(
                        name, read_back=True, error=f"read-back failed: {_describe(error)}"
                    )
            desired = self._options.adapter.records(self._ports(name).intent(intent))
            plan = plan_writes(held, desired, unwatch_departing=self._options.unwatch_departing)
            outcome = await execute_plan(plan, self._sender(switch), self._options.max_batch)
            if session.number == number:
                session.held = desired if outcome.ok else outcome.held_after(held)
            queue_outcome = (
                await self._queues.apply(name, intent.ports)
                if self._queues is not None
                else QueueOutcome()
            )
        failures = [EntityFailure(f.update.describe(), f.error) for f in outcome.failures]
        if queue_outcome.error is not None:
            failures.append(EntityFailure(f"queues of {name}", queue_outcome.error))
        applied = outcome.applied
        return ProgramResult(
            name,
            read_back=did_read,
            inserts=_count(applied, Operation.INSERT),
            modifies=_count(applied, Operation.MODIFY),
            deletes=_count(applied, Operation.DELETE),
            requests=outcome.requests,
            queue_commands=queue_outcome.commands,
            failures=tuple(failures),
            warnings=warnings,
            error=outcome.error,
            elapsed_s=time.monotonic() - started,
        )

    async def read_held(self, switch: str) -> RecordSet:
        """Everything the controller manages that ``switch`` holds now, as records."""
        handle = self._require_up(switch)
        records, _ = await self._read_held(handle)
        return records

    async def _read_held(self, switch: fy.Switch) -> tuple[RecordSet, tuple[str, ...]]:
        records: list[Record] = []
        unmodelled: list[str] = []
        async for entity in _read(switch, self._options.adapter.read_targets()):
            try:
                records.append(from_entity(entity, switch.p4info))
            except UnmodelledEntity as error:
                unmodelled.append(f"left alone: {error}")
        return RecordSet(records), tuple(unmodelled)

    def _sender(self, switch: fy.Switch) -> SendBatch:
        async def send(batch: tuple[Update, ...]) -> None:
            try:
                await switch.write([to_update(update) for update in batch])
            except P4ClientError as error:
                failed = {
                    index: f"{detail.canonical_code.name}: {detail.message}"
                    for index, detail in error.details.items()
                }
                raise BatchWriteError(f"{error.code.name}: {error.message}", failed) from None
            except Exception as error:  # channel gone mid-write, encoding bug: whole request
                raise BatchWriteError(_describe(error)) from None

        return send

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    # -- packet I/O and counters ---------------------------------------------------------------
    async def send_frames(self, switch: str, frames: Sequence[tuple[int, bytes]]) -> int:
        """Packet-out each frame on its port; 0 when the switch cannot take them now."""
        handle = self._switches.get(switch)
        if handle is None or not handle.is_up or not handle.is_primary or not frames:
            return 0
        ports = self._ports(switch)
        packets = [
            fy.P4PacketOut(
                frame, **{p4.PACKET_OUT_PORT: ports.to_device(port), p4.PACKET_OUT_PAD: 0}
            )
            for port, frame in frames
        ]
        try:
            await handle.write(packets)
        except Exception:  # the channel went down between the check and the send
            return 0
        return len(packets)

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        """Port counters (rx, tx, drops, trims, ECN marks) and per-member packet counters."""
        handle = self._require_up(switch)
        device = self._ports(switch).ports_to_device(ports)
        named = self._options.adapter.counter_name
        targets = [
            fy.P4CounterEntry(named(counter), index=device[port])
            for counter in _PORT_COUNTERS
            for port in ports
        ]
        targets += [fy.P4CounterEntry(named(p4.MEMBER_PACKETS), index=index) for index in members]
        cells: dict[tuple[str, int], tuple[int, int]] = {}
        try:
            async for entry in _read(handle, targets):
                name = handle.p4info.counters[entry.counter_id].name
                if entry.index is not None:
                    cells[(name, entry.index)] = (entry.packet_count, entry.byte_count)
        except Exception as error:
            raise SouthboundError(f"{switch}: counter read failed: {_describe(error)}") from None
        return SwitchCounters(
            ports={port: _port_counters(cells, device[port], named) for port in ports},
            members={
                index: MemberCounters(*cells.get((named(p4.MEMBER_PACKETS), index), (0, 0)))
                for index in members
            },
        )

    def _ports(self, switch: str) -> DevicePorts:
        return self._device_ports.get(switch, _SAME_PORTS)

    def _require_up(self, switch: str) -> fy.Switch:
        handle = self._switches.get(switch)
        if handle is None:
            raise SouthboundError(f"unknown switch {switch!r}")
        if not handle.is_up:
            raise SouthboundError(f"{switch}: channel down")
        return handle


def grpc_address(host: str, port: int) -> str:
    """A gRPC target for ``host`` and ``port``; an IPv6 literal gets its brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def _port_counters(
    cells: Mapping[tuple[str, int], tuple[int, int]], port: int, named: Callable[[str], str]
) -> PortCounters:
    rx_packets, rx_bytes = cells.get((named(p4.PORT_RX), port), (0, 0))
    tx_packets, tx_bytes = cells.get((named(p4.PORT_TX), port), (0, 0))
    return PortCounters(
        rx_packets=rx_packets,
        rx_bytes=rx_bytes,
        tx_packets=tx_packets,
        tx_bytes=tx_bytes,
        drops=cells.get((named(p4.PORT_DROPS), port), (0, 0))[0],
        trims=cells.get((named(p4.TRIMS), port), (0, 0))[0],
        ecn_marks=cells.get((named(p4.ECN_MARKS), port), (0, 0))[0],
    )


def _read(switch: fy.Switch, targets: Sequence[Any]) -> AsyncIterator[Any]:
    """``switch.read``, typed as what it is (finsy's overloads read as coroutines to mypy)."""
    reader: Any = switch.read(targets)
    return cast(AsyncIterator[Any], reader)


def _count(updates: Sequence[Update], operation: Operation) -> int:
    return sum(1 for update in updates if update.operation is operation)


def _describe(error: BaseException) -> str:
    if isinstance(error, P4ClientError):
        return f"{error.code.name}: {error.message}"
    return f"{type(error).__name__}: {error}"
