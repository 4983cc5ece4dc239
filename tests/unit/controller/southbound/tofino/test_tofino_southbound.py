"""The tofino southbound with fake switches: the packed pipeline it pushes, LLDP over packet
I/O through the port map, trimming mirror sessions reconciled like table entries, and the
controller's wiring of ``target: tofino``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import finsy as fy
import pytest
from finsy.p4entity import P4UpdateType
from finsy.proto import p4i
from google.protobuf import text_format

from controller.app.config import ConfigError, ControllerConfig
from controller.app.eventlog import EventLog
from controller.app.runtime import build_fabric, build_southbound, check_compatible
from controller.intent import compute_intent
from controller.southbound import p4_program as p4
from controller.southbound.device_ports import DevicePorts
from controller.southbound.interface import LinkEvidence, SwitchRole
from controller.southbound.p4runtime import SwitchEndpoint
from controller.southbound.tofino.device_config import (
    DeviceConfigFormat,
    pack_bf_p4rt,
    pack_stratum,
)
from controller.southbound.tofino.southbound import TofinoOptions, TofinoSouthbound
from controller.southbound.tofino.target import TofinoConfig
from controller.southbound.tofino.tna_program import (
    HIGH_PRIORITY_QUEUE,
    TNA_P4INFO_PATH,
    TRIM_SESSION_BASE,
    TRIM_TRUNCATE_BYTES,
    TrimSessions,
)
from tests.unit.controller.southbound.tofino.compiler_output import PROGRAM, write_compiler_output
from topologies import Topology
from topologies.paths import PathMode

#: l1's ports as a Tofino numbers them.
L1_PORTS = DevicePorts(((1, 132), (2, 140), (3, 148), (4, 156), (5, 164), (6, 172)), 320)


@dataclass
class Events:
    """What the southbound reports to the controller."""

    frames: list[tuple[str, int, bytes]] = field(default_factory=list)
    connected: list[tuple[str, SwitchRole]] = field(default_factory=list)

    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        self.connected.append((switch, role))

    def switch_disconnected(self, switch: str) -> None:
        pass

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        self.frames.append((switch, port, frame))

    def port_status(self, switch: str, port: int, up: bool) -> None:
        pass


@dataclass
class FakeSwitch:
    """The parts of a finsy Switch the southbound uses, for one primary channel."""

    name: str
    packets: Sequence[fy.P4PacketIn] = ()
    sessions: list[fy.P4CloneSessionEntry] = field(default_factory=list)
    written: list[Any] = field(default_factory=list)
    reads: int = 0
    is_up: bool = True
    is_primary: bool = True

    async def write(self, updates: Sequence[Any]) -> None:
        self.written.extend(updates)

    async def read_packets(self, *, queue_size: int) -> AsyncIterator[fy.P4PacketIn]:
        for packet in self.packets:
            yield packet

    async def read(self, target: Any) -> AsyncIterator[Any]:
        if isinstance(target, list):  # counter cells: packets = index, bytes = 100 * index
            for cell in target:
                data = fy.P4CounterData(packet_count=cell.index, byte_count=100 * cell.index)
                yield fy.P4CounterEntry(cell.counter_id, index=cell.index, data=data)
            return
        assert isinstance(target, fy.P4CloneSessionEntry) and target.session_id == 0
        self.reads += 1
        for session in self.sessions:
            yield session


def _southbound(tmp_path: Path, form: DeviceConfigFormat) -> TofinoSouthbound:
    conf = write_compiler_output(tmp_path / form.value)
    return TofinoSouthbound(
        [SwitchEndpoint("l1", "127.0.0.1:50051", 1)],
        TofinoOptions(program=conf, device_config=form, p4info=TNA_P4INFO_PATH),
        {"l1": L1_PORTS},
    )


@pytest.mark.parametrize(
    ("form", "pack"),
    [(DeviceConfigFormat.STRATUM, pack_stratum), (DeviceConfigFormat.BF_P4RT, pack_bf_p4rt)],
)
def test_the_pipeline_pushed_is_the_program_packed_for_the_server(
    tmp_path: Path, form: DeviceConfigFormat, pack: Any
) -> None:
    southbound = _southbound(tmp_path, form)
    switch = southbound._switches["l1"]
    assert switch.options.p4blob == pack(PROGRAM)
    assert switch.p4info.p4blob == pack(PROGRAM)  # what SetForwardingPipelineConfig carries


def test_probes_leave_by_device_port_and_come_back_on_topology_ports(tmp_path: Path) -> None:
    southbound = _southbound(tmp_path, DeviceConfigFormat.STRATUM)
    fake = FakeSwitch(
        "l1",
        packets=[
            fy.P4PacketIn(b"probe-a", metadata={p4.PACKET_IN_PORT: 148}),
            fy.P4PacketIn(b"stray", metadata={p4.PACKET_IN_PORT: 3}),  # no port of the map
            fy.P4PacketIn(b"probe-b", metadata={p4.PACKET_IN_PORT: 172}),
        ],
    )
    southbound._switches["l1"] = fake  # type: ignore[assignment]
    events = Events()
    southbound._events = events

    async def exercise() -> int:
        sent = await southbound.send_frames("l1", [(3, b"lldp-3"), (6, b"lldp-6")])
        await southbound._on_ready(fake)  # type: ignore[arg-type]
        return sent

    assert asyncio.run(exercise()) == 2
    assert [(out.payload, out[p4.PACKET_OUT_PORT]) for out in fake.written] == [
        (b"lldp-3", 148),
        (b"lldp-6", 172),
    ]
    assert events.connected == [("l1", SwitchRole.PRIMARY)]
    assert events.frames == [("l1", 3, b"probe-a"), ("l1", 6, b"probe-b")]


def test_counters_are_read_by_device_port_and_reported_by_topology_port(tmp_path: Path) -> None:
    southbound = _southbound(tmp_path, DeviceConfigFormat.STRATUM)
    fake = FakeSwitch("l1")
    fake.p4info = fy.P4Schema(TNA_P4INFO_PATH)  # type: ignore[attr-defined]
    southbound._switches["l1"] = fake  # type: ignore[assignment]
    counters = asyncio.run(southbound.read_counters("l1", [3, 6], [2]))
    assert counters.ports[3].rx_packets == 148 and counters.ports[3].tx_bytes == 14800
    assert counters.ports[6].trims == 172  # the TNA name of the trim counter was read
    assert counters.members[2].packets == 2


def _session(port: int, length: int = TRIM_TRUNCATE_BYTES) -> fy.P4CloneSessionEntry:
    return fy.P4CloneSessionEntry(
        TRIM_SESSION_BASE + port,
        class_of_service=HIGH_PRIORITY_QUEUE,
        packet_length_bytes=length,
        replicas=[(port, 0)],
    )


def _described(updates: Sequence[Any]) -> list[tuple[str, int, int]]:
    kinds = {
        P4UpdateType.INSERT: "insert",
        P4UpdateType.MODIFY: "modify",
        P4UpdateType.DELETE: "delete",
    }
    return sorted(
        (kinds[update._update_type], update.session_id, update.packet_length_bytes)
        for update in updates
    )


def test_trim_sessions_are_read_back_again_in_each_channel_session(
    leaf_spine: Topology,
) -> None:
    fake = FakeSwitch("l1", sessions=[_session(132), _session(140, length=64), _session(7)])
    sessions = TrimSessions(lambda name: fake, {"l1": L1_PORTS})  # type: ignore[arg-type,return-value]
    ports = compute_intent(leaf_spine).switch("l1").ports

    async def exercise() -> list[int]:
        commands = [(await sessions.apply("l1", ports)).commands]
        commands.append((await sessions.apply("l1", ports)).commands)
        sessions.forget("l1")  # a new channel session: the fake still holds its old sessions
        commands.append((await sessions.apply("l1", ports)).commands)
        return commands

    assert asyncio.run(exercise()) == [6, 0, 6]
    assert fake.reads == 2


def test_trim_session_writes_delete_strays_fix_changed_and_insert_missing(
    leaf_spine: Topology,
) -> None:
    fake = FakeSwitch("l1", sessions=[_session(132), _session(140, length=64), _session(7)])
    sessions = TrimSessions(lambda name: fake, {"l1": L1_PORTS})  # type: ignore[arg-type,return-value]
    ports = compute_intent(leaf_spine).switch("l1").ports
    outcome = asyncio.run(sessions.apply("l1", ports))
    assert outcome.error is None and outcome.commands == 6
    assert _described(fake.written) == [
        ("delete", TRIM_SESSION_BASE + 7, 0),
        ("insert", TRIM_SESSION_BASE + 148, TRIM_TRUNCATE_BYTES),
        ("insert", TRIM_SESSION_BASE + 156, TRIM_TRUNCATE_BYTES),
        ("insert", TRIM_SESSION_BASE + 164, TRIM_TRUNCATE_BYTES),
        ("insert", TRIM_SESSION_BASE + 172, TRIM_TRUNCATE_BYTES),
        ("modify", TRIM_SESSION_BASE + 140, TRIM_TRUNCATE_BYTES),
    ]
    fake.written.clear()
    assert asyncio.run(sessions.apply("l1", ports)).commands == 0  # remembered: nothing to do
    assert fake.written == [] and fake.reads == 1


@pytest.mark.parametrize(
    ("form", "class_of_service"),
    [(DeviceConfigFormat.STRATUM, HIGH_PRIORITY_QUEUE), (DeviceConfigFormat.BF_P4RT, 0)],
)
def test_trimmed_copies_get_the_high_priority_queue_only_where_the_server_takes_a_cos(
    tmp_path: Path, leaf_spine: Topology, form: DeviceConfigFormat, class_of_service: int
) -> None:
    """PI's frontend, inside the SDE's server, refuses a clone session's class of service."""
    southbound = _southbound(tmp_path, form)
    fake = FakeSwitch("l1")
    southbound._queues._lookup = lambda name: fake  # type: ignore[union-attr]
    ports = compute_intent(leaf_spine).switch("l1").ports
    assert asyncio.run(southbound._queues.apply("l1", ports)).error is None  # type: ignore[union-attr]
    assert {update.class_of_service for update in fake.written} == {class_of_service}


def test_trim_sessions_report_a_switch_that_is_not_ours(leaf_spine: Topology) -> None:
    sessions = TrimSessions(lambda name: None, {})
    ports = compute_intent(leaf_spine).switch("l1").ports
    outcome = asyncio.run(sessions.apply("l1", ports))
    assert outcome.error is not None and "not primary" in outcome.error


def _tofino_config(tmp_path: Path) -> ControllerConfig:
    conf = write_compiler_output(tmp_path / "out")
    return ControllerConfig(
        target="tofino", tofino=TofinoConfig(program=conf, p4info=TNA_P4INFO_PATH)
    )


def test_target_tofino_builds_the_tofino_southbound_with_probes(
    leaf_spine: Topology, tmp_path: Path
) -> None:
    config = _tofino_config(tmp_path)
    check_compatible(leaf_spine, config)
    assert isinstance(build_southbound(leaf_spine, config), TofinoSouthbound)
    fabric = build_fabric(leaf_spine, config, EventLog.open(None))
    assert fabric.discovery.evidence is LinkEvidence.PROBES


@pytest.mark.parametrize("mode", list(PathMode))
def test_target_tofino_takes_every_path_mode_the_committed_program_has(
    leaf_spine: Topology, tmp_path: Path, mode: PathMode
) -> None:
    check_compatible(leaf_spine, replace(_tofino_config(tmp_path), path_mode=mode))


def test_target_tofino_refuses_a_path_mode_whose_tables_the_program_lacks(
    leaf_spine: Topology, tmp_path: Path
) -> None:
    info = p4i.P4Info()
    text_format.Parse(TNA_P4INFO_PATH.read_text(), info)
    kept = [table for table in info.tables if not table.preamble.name.startswith("MrcIngress.srv6")]
    del info.tables[:]
    info.tables.extend(kept)
    without_srv6 = tmp_path / "no-srv6.p4info.txtpb"
    without_srv6.write_text(text_format.MessageToString(info))
    config = _tofino_config(tmp_path)
    config = replace(
        config, tofino=replace(config.tofino, p4info=without_srv6), path_mode=PathMode.SRV6
    )
    with pytest.raises(ConfigError, match=r"needs tables the TNA program lacks: MrcIngress\.srv6"):
        check_compatible(leaf_spine, config)
    check_compatible(leaf_spine, replace(config, path_mode=PathMode.ECMP))


def test_target_tofino_is_refused_without_its_program(leaf_spine: Topology, tmp_path: Path) -> None:
    config = _tofino_config(tmp_path)
    with pytest.raises(ConfigError, match=r"needs tofino\.program"):
        check_compatible(leaf_spine, replace(config, tofino=TofinoConfig(p4info=TNA_P4INFO_PATH)))
    missing = replace(config.tofino, p4info=tmp_path / "none.txtpb")
    with pytest.raises(ConfigError, match=r"TNA P4Info .* not found"):
        check_compatible(leaf_spine, replace(config, tofino=missing))
    broken = tmp_path / "broken.conf"
    broken.write_text("{}")
    with pytest.raises(ConfigError, match=r"not a p4c-barefoot \.conf file"):
        check_compatible(leaf_spine, replace(config, tofino=replace(config.tofino, program=broken)))
