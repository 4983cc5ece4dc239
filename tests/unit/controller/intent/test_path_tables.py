"""Structured EV and SRv6 static tables: derived from the topology, identical whatever is down."""

from __future__ import annotations

from ipaddress import IPv6Network

import pytest

from controller.intent import compute_intent, routed_intent
from topologies import LinkId, Topology
from topologies.model import Endpoint
from topologies.paths import PathMode, path_table


def test_ecmp_adds_no_path_table(leaf_spine: Topology) -> None:
    for intent in compute_intent(leaf_spine).switches:
        assert intent.ev_field is None
        assert intent.ev_uplinks == () == intent.local_usids == intent.usid_next_hops


def test_a_leaf_steers_toward_the_far_leaf_by_its_two_bit_field(leaf_spine: Topology) -> None:
    l1 = compute_intent(leaf_spine, path_mode=PathMode.STRUCTURED).switch("l1")
    assert l1.ev_field is not None
    assert (l1.ev_field.shift, l1.ev_field.width) == (16, 2)
    toward_l2 = l1.lookup(leaf_spine.host("h3").nics[0].ipv4.ip)
    assert toward_l2 is not None
    by_value = {
        u.field_value: u.egress_port for u in l1.ev_uplinks if u.next_id == toward_l2.group_id
    }
    assert by_value == {0: 3, 1: 4, 2: 5, 3: 6}  # uplinks to s1..s4 in port order
    # Local hosts are one hop away: never steered.
    local = l1.lookup(leaf_spine.host("h2").nics[0].ipv4.ip)
    assert local is not None
    assert all(u.next_id != local.group_id for u in l1.ev_uplinks)


def test_spines_have_no_field_and_no_uplinks(leaf_spine: Topology) -> None:
    s1 = compute_intent(leaf_spine, path_mode=PathMode.STRUCTURED).switch("s1")
    assert s1.ev_field is None
    assert s1.ev_uplinks == ()


def test_fat_tree_fields_per_tier_and_values_wrap_over_fewer_uplinks(fat_tree: Topology) -> None:
    intent = compute_intent(fat_tree, path_mode=PathMode.STRUCTURED)
    e1, a1 = intent.switch("e1"), intent.switch("a1")
    assert e1.ev_field is not None and a1.ev_field is not None
    assert (e1.ev_field.shift, a1.ev_field.shift) == (16, 17)
    # An aggregation steers only toward other pods (over its cores), not down its own pod.
    e2_group = a1.lookup(fat_tree.host(_host_on(fat_tree, "e2")).nics[0].ipv4.ip)
    assert e2_group is not None
    assert all(u.next_id != e2_group.group_id for u in a1.ev_uplinks)
    assert a1.ev_uplinks


def test_srv6_tables_name_the_switch_and_every_neighbour(leaf_spine: Topology) -> None:
    intent = compute_intent(leaf_spine, path_mode=PathMode.SRV6)
    block = IPv6Network("fcbb:bb00::/32")
    l1 = intent.switch("l1")
    assert [(u.block, u.usid) for u in l1.local_usids] == [(block, 1)]
    assert {hop.usid: hop.egress_port for hop in l1.usid_next_hops} == {3: 3, 4: 4, 5: 5, 6: 6}
    s1 = intent.switch("s1")
    assert {hop.usid: hop.egress_port for hop in s1.usid_next_hops} == {1: 1, 2: 2}
    hop = s1.usid_next_hops[0]
    assert hop.dst_mac == leaf_spine.switch("l1").port_mac(3)


def test_each_plane_has_its_own_block(two_plane: Topology) -> None:
    intent = compute_intent(two_plane, path_mode=PathMode.SRV6)
    assert intent.switch("p0l1").local_usids[0].block == IPv6Network("fcbb:bb00::/32")
    assert intent.switch("p1l1").local_usids[0].block == IPv6Network("fcbb:bb01::/32")


@pytest.mark.parametrize("mode", [PathMode.STRUCTURED, PathMode.SRV6])
def test_nothing_is_recomputed_or_pruned_on_a_failure(leaf_spine: Topology, mode: PathMode) -> None:
    cut = LinkId.between(Endpoint("l2", 3), Endpoint("s1", 2))
    whole = compute_intent(leaf_spine, path_mode=mode)
    for routed_down in (frozenset(), frozenset({cut})):
        after = routed_intent(leaf_spine, routed_down, {cut}, path_mode=mode)
        for before, now in zip(whole.switches, after.switches, strict=True):
            assert now.ev_field == before.ev_field
            assert now.ev_uplinks == before.ev_uplinks
            assert now.local_usids == before.local_usids
            assert now.usid_next_hops == before.usid_next_hops


def test_the_intent_steers_each_ev_onto_the_path_the_path_table_names(fat_tree: Topology) -> None:
    """Walk the switches' structured entries for every path's EV: they must follow the path."""
    intent = compute_intent(fat_tree, path_mode=PathMode.STRUCTURED)
    table = path_table(fat_tree)
    for (source, destination), paths in table.paths.items():
        if source == destination:
            continue
        address = fat_tree.host(_host_on(fat_tree, destination)).nics[0].ipv4.ip
        for path in paths:
            ev = path.structured_ev(table.layout, 0xC0000000)
            for name, port in zip(path.switches, path.ports, strict=False):
                switch = intent.switch(name)
                group = switch.lookup(address)
                assert group is not None
                if switch.ev_field is None:
                    assert group.ports == (port,)
                    continue
                value = (ev >> switch.ev_field.shift) & switch.ev_field.mask
                steered = {(u.next_id, u.field_value): u.egress_port for u in switch.ev_uplinks}
                assert steered.get((group.group_id, value), group.ports[0]) == port


def test_the_diff_carries_the_path_tables(leaf_spine: Topology) -> None:
    from controller.intent import diff_switch

    old = compute_intent(leaf_spine).switch("l1")
    new = compute_intent(leaf_spine, path_mode=PathMode.STRUCTURED).switch("l1")
    forward = diff_switch(old, new)
    assert forward.ev_field == new.ev_field
    assert len(forward.ev_uplinks.inserts) == len(new.ev_uplinks)
    back = diff_switch(new, old)
    assert back.ev_field_cleared
    assert len(back.ev_uplinks.deletes) == len(new.ev_uplinks)


def _host_on(topology: Topology, switch: str) -> str:
    return next(host.name for host, nic in topology.nics() if nic.switch == switch)
