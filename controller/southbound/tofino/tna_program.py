"""The TNA program (``p4src/tna/mrc.p4``) as the tofino southbound writes it: mrc.p4's entities
with the one per-target name map, thresholds in queue cells, and trimming mirror sessions.

The TNA program keeps mrc.p4's P4Runtime names wherever the meaning is the same, so the
intent maps unchanged (:mod:`controller.southbound.mapping`); :data:`NAME_MAP` lists the
exceptions. Trimming lives in egress on Tofino 1 (where the queue depth is seen), so its tables,
actions and counter move from ``MrcIngress.trim`` to ``MrcEgress.trim``.

A table the program does not have is never read, and the one entry the intent always holds for
a feature (``ev_field``'s ``NoAction`` default: no structured EV) is left out with it; entries a
topology really needs from such a table are refused before the controller starts
(:func:`missing_tables`).

Tofino reports queue depth in cells of :data:`CELL_BYTES` bytes, the intent in packets: ECN and
trimming thresholds are multiplied by the configured cells per packet.

A trimming port also needs its mirror session, ``TRIM_SESSION_BASE + device port``: a P4Runtime
clone session that truncates to ``TRIM_TRUNCATE_BYTES`` and enqueues on the high-priority queue
(:class:`TrimSessions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import finsy as fy

from controller.intent import PortIntent
from controller.intent.model import SwitchIntent
from controller.southbound import p4_program as p4
from controller.southbound.device_ports import DevicePorts
from controller.southbound.finsy_codec import FinsyEntity
from controller.southbound.mapping import desired_records
from controller.southbound.p4runtime import ProgramAdapter
from controller.southbound.queues import QueueOutcome
from controller.southbound.records import (
    ActionCall,
    GroupRecord,
    MemberRecord,
    Record,
    RecordSet,
    TableEntryRecord,
)
from p4src import TNA_BUILD_DIR
from p4src.name_map import TNA_RENAMED

#: The compiled TNA program's P4Info (``make build`` where ``p4c-barefoot`` is installed).
TNA_P4INFO_PATH = TNA_BUILD_DIR / "mrc.p4info.txtpb"

#: mrc.p4's name -> the TNA program's, for tables, actions, action profiles and counters that
#: moved; the one per-target map lives with the programs (:mod:`p4src.name_map`).
NAME_MAP: Mapping[str, str] = TNA_RENAMED
#: Parameters that are queue depths (packets in the intent, cells on Tofino).
DEPTH_PARAMS: frozenset[tuple[str, str]] = frozenset(
    {
        (p4.SET_ECN_THRESHOLDS, "min_qdepth"),
        (p4.SET_ECN_THRESHOLDS, "max_qdepth"),
        (p4.SET_TRIM_CONFIG, "threshold"),
    }
)

#: Tofino's queue accounting unit.
CELL_BYTES = 80
#: Cells a full-size (1500-byte MTU) frame takes: the default cells per intent packet.
DEFAULT_CELLS_PER_PACKET = math.ceil(1518 / CELL_BYTES)

# Trimming mirror sessions (p4src/tna/include/defines.p4).
TRIM_SESSION_BASE = 512
#: One session per 9-bit port.
TRIM_SESSION_COUNT = 512
TRIM_TRUNCATE_BYTES = 144
HIGH_PRIORITY_QUEUE = 1


def tna_name(name: str) -> str:
    """The TNA program's name for mrc.p4's ``name``."""
    return NAME_MAP.get(name, name)


def tna_records(records: RecordSet, tables: Collection[str], cells_per_packet: int) -> RecordSet:
    """``records`` (mrc.p4's) as the TNA program with ``tables`` takes them."""
    return RecordSet(
        _tna_record(record, cells_per_packet)
        for record in records.records()
        if not _absent_no_op(record, tables)
    )


def tna_adapter(
    tables: Collection[str], cells_per_packet: int = DEFAULT_CELLS_PER_PACKET
) -> ProgramAdapter:
    """The P4Runtime southbound's view of the TNA program whose P4Info has ``tables``."""
    if cells_per_packet < 1:
        raise ValueError(f"cells per packet must be at least 1, not {cells_per_packet}")
    present = frozenset(tables)

    def records(intent: SwitchIntent) -> RecordSet:
        return tna_records(desired_records(intent), present, cells_per_packet)

    def read_targets() -> list[FinsyEntity]:
        return tna_read_targets(present)

    return ProgramAdapter(records=records, read_targets=read_targets, counter_name=tna_name)


def missing_tables(intents: Sequence[SwitchIntent], tables: Collection[str]) -> list[str]:
    """Tables (TNA names) that the intents need and a program with ``tables`` lacks."""
    needed = {
        record.table
        for intent in intents
        for record in tna_records(desired_records(intent), tables, 1).records()
        if isinstance(record, TableEntryRecord)
    }
    return sorted(needed - set(tables))


def tna_read_targets(tables: Collection[str]) -> list[FinsyEntity]:
    """Wildcard reads of every table (of ``tables``) and profile the controller manages."""
    targets: list[FinsyEntity] = [
        fy.P4TableEntry(tna_name(table)) for table in p4.MANAGED_TABLES if tna_name(table) in tables
    ]
    targets += [
        fy.P4TableEntry(tna_name(table), is_default_action=True)
        for table in p4.MANAGED_DEFAULT_TABLES
        if tna_name(table) in tables
    ]
    targets += [
        fy.P4ActionProfileMember(tna_name(p4.HASHED_SELECTOR)),
        fy.P4ActionProfileGroup(tna_name(p4.HASHED_SELECTOR)),
    ]
    return targets


def _absent_no_op(record: Record, tables: Collection[str]) -> bool:
    """A default entry that does nothing, for a table the program does not have."""
    return (
        isinstance(record, TableEntryRecord)
        and record.is_default
        and record.action == ActionCall.of(p4.NO_ACTION)
        and tna_name(record.table) not in tables
    )


def _tna_action(call: ActionCall, cells_per_packet: int) -> ActionCall:
    params = tuple(
        (name, value * cells_per_packet if (call.name, name) in DEPTH_PARAMS else value)
        for name, value in call.params
    )
    return ActionCall(tna_name(call.name), params)


def _tna_record(record: Record, cells_per_packet: int) -> Record:
    if isinstance(record, MemberRecord):
        return MemberRecord(
            tna_name(record.profile),
            record.member_id,
            _tna_action(record.action, cells_per_packet),
        )
    if isinstance(record, GroupRecord):
        return replace(record, profile=tna_name(record.profile))
    return replace(
        record,
        table=tna_name(record.table),
        action=None if record.action is None else _tna_action(record.action, cells_per_packet),
    )


# -- trimming mirror sessions ------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class TrimSession:
    """The mirror session that trims toward one device port."""

    device_port: int
    #: The queue of the trimmed copy: the high-priority one, where the server takes a class of
    #: service (Stratum); 0 where it refuses one (the SDE's server: docs/tofino.md).
    class_of_service: int = HIGH_PRIORITY_QUEUE

    @property
    def session_id(self) -> int:
        """``TRIM_SESSION_BASE + port``, as the program computes it."""
        return TRIM_SESSION_BASE + self.device_port

    def entity(self) -> fy.P4CloneSessionEntry:
        """The clone session: one copy out of the port, truncated, on its class of service."""
        return fy.P4CloneSessionEntry(
            self.session_id,
            class_of_service=self.class_of_service,
            packet_length_bytes=TRIM_TRUNCATE_BYTES,
            replicas=[(self.device_port, 0)],
        )


def trim_sessions(
    ports: Sequence[PortIntent],
    device_ports: DevicePorts,
    class_of_service: int = HIGH_PRIORITY_QUEUE,
) -> set[TrimSession]:
    """The sessions a switch needs: one per port that trims."""
    return {
        TrimSession(device_ports.to_device(port.port), class_of_service)
        for port in ports
        if port.trim_threshold is not None
    }


#: Finds a switch's finsy handle when it is up and ours (None otherwise).
SwitchLookup = Callable[[str], "fy.Switch | None"]


#: What identifies a clone session's content: class of service, truncation, replicas.
_Shape = tuple[int, int, str]


def _shape(entry: fy.P4CloneSessionEntry) -> _Shape:
    return (entry.class_of_service, entry.packet_length_bytes, entry.replicas_str())


class TrimSessions:
    """Keeps each switch's trimming mirror sessions, in place of BMv2's Thrift queue backend.

    What a switch holds is read back on the first apply of each channel session (a restart, or
    another controller, may have left sessions), then only differences are written: a session
    in the trimming range that no port needs is deleted, one that differs is modified.
    """

    def __init__(
        self,
        lookup: SwitchLookup,
        device_ports: Mapping[str, DevicePorts],
        class_of_service: int = HIGH_PRIORITY_QUEUE,
    ) -> None:
        self._lookup = lookup
        self._device_ports = dict(device_ports)
        self._class_of_service = class_of_service
        self._held: dict[str, dict[int, _Shape]] = {}

    async def apply(self, switch: str, ports: Sequence[PortIntent]) -> QueueOutcome:
        """Write the difference between the sessions ``ports`` need and those held."""
        handle = self._lookup(switch)
        if handle is None:
            return QueueOutcome(error="trim sessions: channel down or not primary")
        sessions = trim_sessions(
            ports, self._device_ports.get(switch, DevicePorts()), self._class_of_service
        )
        wanted = {session.session_id: session.entity() for session in sessions}
        try:
            held = self._held.get(switch)
            if held is None:
                held = await self._read(handle)
            updates: list[Any] = [-fy.P4CloneSessionEntry(sid) for sid in held if sid not in wanted]
            updates += [
                (~entry if sid in held else +entry)
                for sid, entry in sorted(wanted.items())
                if held.get(sid) != _shape(entry)
            ]
            if updates:
                await handle.write(updates)
        except Exception as error:  # a refused write or a lost channel: report, never raise
            self._held.pop(switch, None)
            return QueueOutcome(error=f"trim sessions: {type(error).__name__}: {error}")
        self._held[switch] = {sid: _shape(entry) for sid, entry in wanted.items()}
        return QueueOutcome(commands=len(updates))

    def forget(self, switch: str) -> None:
        """A new channel session: read the switch back before the next write."""
        self._held.pop(switch, None)

    async def _read(self, handle: fy.Switch) -> dict[int, _Shape]:
        held: dict[int, _Shape] = {}
        reader: Any = handle.read(fy.P4CloneSessionEntry())
        async for entry in cast(Any, reader):
            if TRIM_SESSION_BASE <= entry.session_id < TRIM_SESSION_BASE + TRIM_SESSION_COUNT:
                held[entry.session_id] = _shape(entry)
        return held
