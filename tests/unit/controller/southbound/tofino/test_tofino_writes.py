"""Every write the tofino southbound makes for each shipped topology, before and after every
link failure (both routing phases), is valid for the TNA program's P4Info: names and ids,
match kinds, value widths, the table's actions, selector group sizes; encoded by finsy. The
topologies get a port map, so what is checked is what goes to a device that numbers its ports
otherwise, mirror sessions and packet-outs included."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from functools import cache

import finsy as fy
import pytest
from finsy.p4schema import P4ActionScope, P4MatchType

from controller.intent import compute_intent, prune_dead_next_hops
from controller.intent.model import SwitchIntent
from controller.southbound import p4_program as p4
from controller.southbound.device_ports import DevicePorts
from controller.southbound.finsy_codec import to_entity
from controller.southbound.plan import plan_writes
from controller.southbound.records import (
    GroupRecord,
    MemberRecord,
    Record,
    RecordSet,
    TableEntryRecord,
)
from controller.southbound.tofino.tna_program import (
    DEFAULT_CELLS_PER_PACKET,
    HIGH_PRIORITY_QUEUE,
    NAME_MAP,
    TNA_P4INFO_PATH,
    TRIM_SESSION_BASE,
    TRIM_TRUNCATE_BYTES,
    missing_tables,
    tna_adapter,
    tna_name,
    tna_read_targets,
    trim_sessions,
)
from p4src import SOURCE_DIR
from topologies import Topology, load_topology
from topologies.paths import PathMode
from topologies.presets import PRESETS

CPU_DEVICE_PORT = 320


def device_port(port: int) -> int:
    """A Tofino-like numbering: front-panel ports 4 lanes apart, from 128."""
    return 128 + 4 * port


def with_port_map(topology: Topology) -> Topology:
    """``topology`` with every used switch port mapped as :func:`device_port` says."""
    switches = tuple(
        replace(
            switch,
            device_ports=tuple(
                (port, device_port(port)) for port in topology.switch_ports(switch.name)
            ),
            cpu_device_port=CPU_DEVICE_PORT,
        )
        for switch in topology.switches
    )
    return replace(topology, switches=switches)


@cache
def schema() -> fy.P4Schema:
    return fy.P4Schema(TNA_P4INFO_PATH)


def tables() -> list[str]:
    return [table.name for table in schema().tables]


def scenarios(topology: Topology, mode: PathMode) -> Iterator[tuple[str, list[SwitchIntent]]]:
    """The intact fabric, then each switch-to-switch link down: the fabric-wide recomputation
    and each switch pruning its own dead next hops (``reactive``, and ``static``/``converge``'s
    first phase)."""
    base = compute_intent(topology, path_mode=mode)
    yield "intact", list(base.switches)
    for link in topology.links:
        down = {link.id}
        recomputed = compute_intent(topology, down, mode)
        yield f"{link.id} down, recomputed", list(recomputed.switches)
        yield f"{link.id} down, pruned", list(prune_dead_next_hops(base, topology, down).switches)


def supported_modes(topology: Topology) -> list[PathMode]:
    """The path modes whose tables the TNA program has (the controller refuses the others)."""
    return [
        mode
        for mode in PathMode
        if not missing_tables(compute_intent(topology, path_mode=mode).switches, tables())
    ]


def check_width(value: int, bitwidth: int, what: str) -> None:
    assert 0 <= value < 1 << bitwidth, f"{what}={value} does not fit {bitwidth} bits"


def check_record(record: Record) -> None:
    """What finsy's encoding does not check by itself: match kinds and field sets, actions
    allowed in the table or profile, group sizes; widths explicitly too."""
    info = schema()
    if isinstance(record, TableEntryRecord):
        table = info.tables[record.table]
        fields = {field.name: field for field in table.match_fields}
        assert {name for name, _ in record.match} == set(fields), record.describe()
        for name, value in record.match:
            field = fields[name]
            if isinstance(value, tuple):
                assert field.match_type == P4MatchType.LPM, record.describe()
                check_width(value[0], field.bitwidth, name)
                assert 0 <= value[1] <= field.bitwidth
            else:
                assert field.match_type == P4MatchType.EXACT, record.describe()
                check_width(value, field.bitwidth, name)
        refused = P4ActionScope.TABLE_ONLY if record.is_default else (P4ActionScope.DEFAULT_ONLY)
        allowed = {ref.name for ref in table.actions if ref.scope != refused}
        if record.action is not None:
            assert record.action.name in allowed, record.describe()
            check_action(record.action.name, record.action.params)
        else:
            assert table.action_profile is not None, record.describe()
    elif isinstance(record, MemberRecord):
        profile = info.action_profiles[record.profile]
        allowed = {action.name for action in profile.actions}
        assert record.action.name in allowed, record.describe()
        check_action(record.action.name, record.action.params)
    elif isinstance(record, GroupRecord):
        profile = info.action_profiles[record.profile]
        assert profile.with_selector
        if profile.max_group_size:
            assert len(record.members) <= profile.max_group_size, record.describe()
        for member in record.members:
            if member.watch_port is not None:
                check_width(member.watch_port, 9, "watch_port")


def check_action(name: str, params: tuple[tuple[str, int], ...]) -> None:
    action = schema().actions[name]
    widths = {param.name: param.bitwidth for param in action.params}
    assert {key for key, _ in params} == set(widths), name
    for key, value in params:
        check_width(value, widths[key], f"{name}.{key}")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_write_of_every_scenario_is_valid_for_the_tna_p4info(preset: str) -> None:
    topology = with_port_map(load_topology(preset))
    adapter = tna_adapter(tables(), DEFAULT_CELLS_PER_PACKET)
    ports = {switch.name: DevicePorts.of(switch) for switch in topology.switches}
    modes = supported_modes(topology)
    assert modes == list(PathMode)  # the TNA program has every path mode's tables
    counted = 0
    for mode in modes:
        held: dict[str, RecordSet] = {}
        for _, intents in scenarios(topology, mode):
            for intent in intents:
                desired = adapter.records(ports[intent.switch].intent(intent))
                before = held.get(intent.switch, RecordSet())
                for old, new in ((before, desired), (desired, before)):  # failing, recovering
                    for update in plan_writes(old, new, unwatch_departing=True).updates:
                        check_record(update.record)
                        to_entity(update.record).encode(schema())
                        counted += 1
                held.setdefault(intent.switch, desired)
    assert counted > 0


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_ports_reach_the_device_renumbered_and_every_session_and_packet_out_encodes(
    preset: str,
) -> None:
    topology = with_port_map(load_topology(preset))
    adapter = tna_adapter(tables(), DEFAULT_CELLS_PER_PACKET)
    for intent in compute_intent(topology).switches:
        ports = DevicePorts.of(topology.switch(intent.switch))
        used = topology.switch_ports(intent.switch)
        records = adapter.records(ports.intent(intent)).records()
        ecn_ports = {
            dict(record.match)["egress_port"]
            for record in records
            if isinstance(record, TableEntryRecord) and record.table == p4.PORT_ECN
        }
        assert ecn_ports == {device_port(port) for port in used}
        sessions = trim_sessions(intent.ports, ports)
        assert {session.device_port for session in sessions} == {
            device_port(port.port) for port in intent.ports if port.trim_threshold is not None
        }
        for session in sessions:
            message = session.entity().encode(schema())
            entry = message.packet_replication_engine_entry.clone_session_entry
            assert entry.session_id == TRIM_SESSION_BASE + session.device_port
            assert entry.packet_length_bytes == TRIM_TRUNCATE_BYTES
        for port in used:
            out = fy.P4PacketOut(
                b"\x00" * 60,
                **{p4.PACKET_OUT_PORT: ports.to_device(port), p4.PACKET_OUT_PAD: 0},
            )
            out.encode_update(schema())


def test_thresholds_are_written_in_queue_cells() -> None:
    topology = load_topology("leaf-spine")
    intent = compute_intent(topology).switch("l1")
    fabric_port = next(port for port in intent.ports if not port.host_facing)
    assert fabric_port.trim_threshold is not None
    records = tna_adapter(tables(), 19).records(intent).records()
    by_table = {
        (record.table, dict(record.match)["egress_port"]): record
        for record in records
        if isinstance(record, TableEntryRecord) and "egress_port" in dict(record.match)
    }
    trim = by_table[(tna_name(p4.TRIM_CONFIG), fabric_port.port)].action
    ecn = by_table[(p4.PORT_ECN, fabric_port.port)].action
    assert trim is not None and ecn is not None
    assert dict(trim.params)["threshold"] == 19 * fabric_port.trim_threshold
    assert dict(ecn.params) == {
        "min_qdepth": 19 * fabric_port.ecn_min_threshold,
        "max_qdepth": 19 * fabric_port.ecn_max_threshold,
    }


def test_every_name_the_map_gives_and_every_read_and_counter_exist_in_the_p4info() -> None:
    info = schema()
    for name in NAME_MAP.values():
        found = [
            kind
            for kind in (info.tables, info.actions, info.action_profiles, info.counters)
            if name in {entity.name for entity in kind}
        ]
        assert found, name
    for target in tna_read_targets(tables()):
        target.encode(info)
    counters = {counter.name: counter.size for counter in info.counters}
    for counter in (p4.PORT_RX, p4.PORT_TX, p4.PORT_DROPS, p4.TRIMS, p4.ECN_MARKS):
        assert counters[tna_name(counter)] >= 512, counter  # every 9-bit device port
    packet_in = {meta.name for meta in info.controller_packet_metadata["packet_in"].metadata}
    assert p4.PACKET_IN_PORT in packet_in


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_shipped_topologies_need_no_table_the_tna_program_lacks(preset: str) -> None:
    intents = compute_intent(load_topology(preset)).switches
    assert missing_tables(intents, tables()) == []


def test_a_program_without_a_feature_skips_its_no_op_default_and_names_what_is_needed() -> None:
    topology = load_topology("leaf-spine")
    ev_tables = {tna_name(p4.EV_FIELD), tna_name(p4.EV_UPLINKS)}
    without_ev = [table for table in tables() if table not in ev_tables]
    intent = compute_intent(topology).switch("l1")
    written = {
        record.table
        for record in tna_adapter(without_ev).records(intent).records()
        if isinstance(record, TableEntryRecord)
    }
    assert not written & ev_tables  # hashing only: ev_field's NoAction default is left out
    structured = compute_intent(topology, path_mode=PathMode.STRUCTURED).switches
    assert missing_tables(structured, without_ev) == sorted(ev_tables)
    assert not any(
        isinstance(target, fy.P4TableEntry) and target.table_id in ev_tables
        for target in tna_read_targets(without_ev)
    )


def test_the_trim_session_constants_match_the_tna_programs_defines() -> None:
    text = (SOURCE_DIR / "tna" / "include" / "defines.p4").read_text()
    defined = {
        name: int(value)
        for name, value in re.findall(r"^const \S+ (\w+) = (\d+);", text, flags=re.MULTILINE)
    }
    assert defined["TRIM_SESSION_BASE"] == TRIM_SESSION_BASE
    assert defined["TRIM_TRUNCATE_BYTES"] == TRIM_TRUNCATE_BYTES
    assert defined["QID_HIGH"] == HIGH_PRIORITY_QUEUE
