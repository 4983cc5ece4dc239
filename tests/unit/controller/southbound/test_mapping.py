"""Intent -> mrc.p4 entities: one member per port and its unwatched twin, a group (one anchor
twin, the other members watched) and its selector entry per next-hop group, an LPM entry per
route, trimming and ECN per port, DSCP classes; all valid P4Info."""

from __future__ import annotations

import re
from ipaddress import IPv4Network, IPv6Network

import finsy as fy
import pytest

from controller.intent import DscpRule, Route, compute_intent
from controller.southbound import p4_program as p4
from controller.southbound.finsy_codec import from_entity, to_entity
from controller.southbound.mapping import (
    desired_records,
    mac_to_int,
    route_record,
    trim_dscp_record,
)
from controller.southbound.records import GroupRecord, MemberRecord, TableEntryRecord
from p4src import SOURCE_DIR
from topologies import load_topology, load_topology_text
from topologies.document import dump_document, explicit_document
from wire.constants import DscpClass, RoceDscp

DEFINES = SOURCE_DIR / "include" / "defines.p4"


@pytest.fixture(scope="module")
def schema() -> fy.P4Schema:
    return fy.P4Schema(p4.P4INFO_PATH)


@pytest.fixture(scope="module")
def fat_tree_intents():
    return compute_intent(load_topology("fat-tree")).switches[:3]


@pytest.fixture(scope="module")
def l1_records(leaf_spine):
    return desired_records(compute_intent(leaf_spine).switch("l1"))


def _of_table(records, table):
    return [r for r in records.values() if isinstance(r, TableEntryRecord) and r.table == table]


def test_every_used_port_gets_one_member_whose_id_is_its_index_plus_one(l1_records):
    members = sorted(
        (
            r
            for r in l1_records.values()
            if isinstance(r, MemberRecord) and r.member_id < p4.PINNED_MEMBER_ID_BASE
        ),
        key=lambda r: r.member_id,
    )
    assert [m.member_id for m in members] == [1, 2, 3, 4, 5, 6]
    twins = sorted(
        r.member_id - p4.PINNED_MEMBER_ID_BASE
        for r in l1_records.values()
        if isinstance(r, MemberRecord) and r.member_id > p4.PINNED_MEMBER_ID_BASE
    )
    assert twins == [1, 2, 3, 4, 5, 6], "every member has its twin, used or not"
    ports = [dict(m.action.params)["port"] for m in members]
    assert ports == [1, 2, 3, 4, 5, 6]
    assert [dict(m.action.params)["member_index"] for m in members] == [0, 1, 2, 3, 4, 5]


def test_a_one_member_group_holds_the_unwatched_twin_of_its_member(l1_records):
    """BMv2 dies (SIGFPE) when a packet reaches a group whose every member is down; a group
    with a single member has nothing to fail over to, so it never watches a port. It holds a
    twin of the member (same action, counter cell and port, its own id), so that growing back
    to a watched group never re-watches a member in place, which PI refuses."""
    members = {r.member_id: r for r in l1_records.values() if isinstance(r, MemberRecord)}
    groups = {r.group_id: r for r in l1_records.values() if isinstance(r, GroupRecord)}
    host_groups = [g for g in groups.values() if len(g.members) == 1]
    assert len(host_groups) == 2, "one single-member group per local host"
    for group in host_groups:
        (ref,) = group.members
        assert ref.watch_port is None
        assert ref.member_id > p4.PINNED_MEMBER_ID_BASE
        twin = members[ref.member_id]
        watched = members[ref.member_id - p4.PINNED_MEMBER_ID_BASE]
        assert twin.action == watched.action


def test_a_group_cut_down_to_one_member_swaps_to_the_twin_and_back(leaf_spine):
    """l1 with three of its four uplinks down: the far leaf's group is pinned to the one
    left; once they return, three of the four are watched again over the ordinary member ids,
    and the first is the group's anchor twin again."""
    uplinks = [
        link
        for link in leaf_spine.links
        if {link.a.node, link.b.node} in ({"l1", "s2"}, {"l1", "s3"}, {"l1", "s4"})
    ]
    down = {link.id for link in uplinks}
    assert len(down) == 3
    cut = desired_records(compute_intent(leaf_spine, down).switch("l1"))
    far = next(r for r in cut.values() if isinstance(r, GroupRecord) and r.group_id == 3)
    assert [(m.member_id, m.watch_port) for m in far.members] == [
        (p4.PINNED_MEMBER_ID_BASE + 3, None)
    ]
    healed = desired_records(compute_intent(leaf_spine).switch("l1"))
    far = next(r for r in healed.values() if isinstance(r, GroupRecord) and r.group_id == 3)
    assert [m.member_id for m in far.members] == [4, 5, 6, p4.PINNED_MEMBER_ID_BASE + 3]


def test_a_member_rewrites_to_the_switch_port_mac_and_the_neighbours_mac(leaf_spine, l1_records):
    (uplink,) = [
        r
        for r in l1_records.values()
        if isinstance(r, MemberRecord)
        and dict(r.action.params)["port"] == 3
        and r.member_id < p4.PINNED_MEMBER_ID_BASE
    ]
    params = dict(uplink.action.params)
    assert params["smac"] == mac_to_int(leaf_spine.switch("l1").port_mac(3))
    assert params["dmac"] == mac_to_int(leaf_spine.switch("s1").port_mac(1))


def test_the_group_toward_the_far_leaf_spreads_over_every_spine_and_watches_all_but_one(
    l1_records,
):
    """BMv2 dies (SIGFPE) on a packet for a group whose every member its watch_port has
    deactivated; the group's first member is held as its unwatched twin (the anchor), so at
    least one member is always live. Its share dies with its port until the controller prunes
    it."""
    groups = {r.group_id: r for r in l1_records.values() if isinstance(r, GroupRecord)}
    assert sorted(groups) == [1, 2, 3]
    spread = groups[3]
    assert [(m.member_id, m.weight, m.watch_port) for m in spread.members] == [
        (4, 1, 4),
        (5, 1, 5),
        (6, 1, 6),
        (p4.PINNED_MEMBER_ID_BASE + 3, 1, None),
    ]


def test_every_group_of_every_shipped_topology_has_exactly_one_unwatched_member():
    for name in ("leaf-spine", "two-plane", "fat-tree"):
        for intent in compute_intent(load_topology(name)).switches:
            for record in desired_records(intent).values():
                if isinstance(record, GroupRecord):
                    unwatched = [m for m in record.members if m.watch_port is None]
                    assert len(unwatched) == 1, f"{name} {intent.switch}: {record.describe()}"


def test_each_group_is_selected_by_its_next_hop_id(l1_records):
    selectors = _of_table(l1_records, p4.NEXT_HASHED)
    assert sorted((dict(s.match)["next_id"], s.group_id) for s in selectors) == [
        (1, 1),
        (2, 2),
        (3, 3),
    ]


def test_routes_become_lpm_entries_setting_the_groups_id(leaf_spine, l1_records):
    intent = compute_intent(leaf_spine).switch("l1")
    v4 = _of_table(l1_records, p4.ROUTES_V4)
    v6 = _of_table(l1_records, p4.ROUTES_V6)
    assert len(v4) == len(intent.routes_v4) and len(v6) == len(intent.routes_v6)
    record = route_record(Route(IPv4Network("10.0.2.0/24"), 3))
    assert record.match == (("ipv4_dst", (0x0A000200, 24)),)
    assert record.action is not None and dict(record.action.params) == {"next_id": 3}
    v6_record = route_record(Route(IPv6Network("fd00:0:2::/64"), 3))
    assert v6_record.table == p4.ROUTES_V6
    assert v6_record.match[0][1] == (int(IPv6Network("fd00:0:2::/64").network_address), 64)


def test_ecn_is_off_toward_hosts_and_on_between_switches(l1_records):
    ecn = {dict(r.match)["egress_port"]: r.action for r in _of_table(l1_records, p4.PORT_ECN)}
    assert ecn[1] is not None and ecn[1].name == p4.ECN_DISABLED
    assert ecn[3] is not None and ecn[3].name == p4.SET_ECN_THRESHOLDS
    assert dict(ecn[3].params) == {"min_qdepth": 10, "max_qdepth": 40}


def test_trimming_marks_host_facing_ports_as_last_hop(l1_records):
    trim = {
        dict(r.match)["egress_port"]: dict(r.action.params)
        for r in _of_table(l1_records, p4.TRIM_CONFIG)
        if r.action is not None
    }
    assert trim[1] == {"threshold": 48, "host_facing": 1}
    assert trim[3] == {"threshold": 48, "host_facing": 0}


def test_a_fabric_with_trimming_off_writes_no_trim_entry_and_keeps_ecn(leaf_spine):
    document = explicit_document(leaf_spine)
    document["settings"]["trimming"] = False
    records = desired_records(
        compute_intent(load_topology_text(dump_document(document))).switch("l1")
    )
    assert _of_table(records, p4.TRIM_CONFIG) == []
    assert len(_of_table(records, p4.PORT_ECN)) == len(leaf_spine.switch_ports("l1"))


def test_dscp_values_map_to_the_programs_class_numbers_and_set_the_trim_dscp_default(
    l1_records,
):
    classes = {
        dict(r.match)["dscp"]: dict(r.action.params)["mrc_class"]
        for r in _of_table(l1_records, p4.DSCP_CLASSES)
        if r.action is not None
    }
    assert classes == {4: 1, 5: 2, 6: 3, 12: 4, 13: 5, 46: 6, 26: 7, 28: 8, 48: 9}
    (default,) = _of_table(l1_records, p4.TRIM_DSCP)
    assert default.is_default and default.action is not None
    assert dict(default.action.params) == {"trimmed": 12, "trimmed_lasthop": 13}


def test_renumbered_trimmed_classes_follow_into_trim_dscp():
    rules = (DscpRule(20, DscpClass.TRIMMED), DscpRule(21, DscpClass.TRIMMED_LASTHOP))
    record = trim_dscp_record(rules)
    assert record is not None and record.action is not None
    assert dict(record.action.params) == {"trimmed": 20, "trimmed_lasthop": 21}
    assert trim_dscp_record(rules[:1]) is None


def test_class_numbers_match_the_p4_programs_defines():
    text = DEFINES.read_text()
    for traffic_class, number in p4.P4_CLASS_OF.items():
        name = traffic_class.name
        if isinstance(traffic_class, RoceDscp):
            name = f"ROCE_{name}"
        found = re.search(rf"CLASS_{name}\s*=\s*(\d+);", text)
        assert found is not None, f"CLASS_{name} missing in defines.p4"
        assert int(found.group(1)) == number


def test_the_compiled_cpu_port_matches_the_p4_programs_defines():
    found = re.search(r"CPU_PORT\s*=\s*(\d+);", DEFINES.read_text())
    assert found is not None and int(found.group(1)) == p4.COMPILED_CPU_PORT


def test_every_record_survives_a_round_trip_through_finsy_and_protobuf(schema, fat_tree_intents):
    for intent in fat_tree_intents:
        for record in desired_records(intent).values():
            message = to_entity(record).encode(schema)
            decoded = type(to_entity(record)).decode(message, schema)
            assert from_entity(decoded, schema) == record


def test_every_name_the_mapping_writes_exists_in_the_p4info(schema, l1_records):
    for record in l1_records.values():
        if isinstance(record, TableEntryRecord):
            assert schema.tables[record.table].name == record.table
        if isinstance(record, MemberRecord | GroupRecord):
            assert schema.action_profiles[record.profile].name == record.profile
        action = getattr(record, "action", None)
        if action is not None:
            assert schema.actions[action.name].name == action.name
    for counter in (p4.PORT_RX, p4.PORT_TX, p4.PORT_DROPS, p4.TRIMS, p4.ECN_MARKS):
        assert schema.counters[counter].name == counter
    assert schema.counters[p4.MEMBER_PACKETS].name == p4.MEMBER_PACKETS


def test_a_malformed_mac_is_refused():
    with pytest.raises(ValueError, match="malformed MAC"):
        mac_to_int("02:00:00:01")


@pytest.mark.parametrize("mode", ["structured", "srv6"])
def test_path_table_records_use_p4info_names_and_survive_a_round_trip(schema, mode):
    from topologies.paths import PathMode

    intent = compute_intent(load_topology("fat-tree"), path_mode=PathMode(mode))
    records = desired_records(intent.switch("a1"))
    tables = {p4.EV_UPLINKS, p4.EV_FIELD} if mode == "structured" else {p4.MY_USID, p4.USID_NEXT}
    written = [r for r in records.values() if isinstance(r, TableEntryRecord) and r.table in tables]
    assert {r.table for r in written} == tables
    for record in written:
        assert schema.tables[record.table].name == record.table
        message = to_entity(record).encode(schema)
        assert from_entity(type(to_entity(record)).decode(message, schema), schema) == record


def test_ecmp_resets_the_structured_field_to_no_action(l1_records):
    (default,) = _of_table(l1_records, p4.EV_FIELD)
    assert default.is_default
    assert default.action is not None and default.action.name == p4.NO_ACTION


def test_a_usid_entry_matches_the_blocks_top_32_bits(leaf_spine):
    from topologies.paths import PathMode

    records = desired_records(compute_intent(leaf_spine, path_mode=PathMode.SRV6).switch("l1"))
    (mine,) = _of_table(records, p4.MY_USID)
    assert dict(mine.match) == {"block": 0xFCBBBB00, "usid": 1}
