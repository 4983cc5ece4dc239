"""Diffs: what to insert, modify and delete, per table and per switch."""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv4Network

import pytest

from controller.intent import (
    Route,
    compute_intent,
    diff_intents,
    diff_switch,
    diff_table,
)
from topologies import load_topology_text
from topologies.document import dump_document, explicit_document


def test_table_diff_sorts_entities_into_inserts_modifies_and_deletes():
    net = IPv4Network
    old = [Route(net("10.0.0.1/32"), 1), Route(net("10.0.0.2/32"), 1), Route(net("10.0.0.3/32"), 1)]
    new = [Route(net("10.0.0.2/32"), 2), Route(net("10.0.0.3/32"), 1), Route(net("10.0.0.4/32"), 1)]
    diff = diff_table(old, new)
    assert diff.inserts == (Route(net("10.0.0.4/32"), 1),)
    assert diff.modifies == (Route(net("10.0.0.2/32"), 2),)
    assert diff.deletes == (Route(net("10.0.0.1/32"), 1),)
    assert len(diff) == 3


def test_a_table_holding_a_key_twice_is_refused():
    twice = [Route(IPv4Network("10.0.0.1/32"), 1), Route(IPv4Network("10.0.0.1/32"), 2)]
    with pytest.raises(ValueError, match="twice"):
        diff_table([], twice)


def test_equal_intents_differ_in_nothing(leaf_spine):
    diff = diff_intents(compute_intent(leaf_spine), compute_intent(leaf_spine))
    assert diff.is_empty
    assert diff.change_count == 0


def test_from_nothing_every_entity_is_an_insert(leaf_spine):
    intent = compute_intent(leaf_spine)
    diff = diff_intents(None, intent)
    assert [d.switch for d in diff.switches] == [s.switch for s in intent.switches]
    l1, l1_diff = intent.switch("l1"), diff.switch("l1")
    assert l1_diff.routes_v4.inserts == l1.routes_v4
    assert l1_diff.groups.inserts == l1.groups
    assert l1_diff.members.inserts == l1.members
    assert l1_diff.ports.inserts == l1.ports
    assert l1_diff.dscp_rules.inserts == l1.dscp_rules
    assert (l1_diff.cpu_port, l1_diff.lldp) == (255, l1.lldp)
    assert not (l1_diff.routes_v4.modifies or l1_diff.routes_v4.deletes)


def test_a_spine_link_cut_is_three_group_modifies(leaf_spine, link_between):
    healthy = compute_intent(leaf_spine)
    degraded = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    diff = diff_intents(healthy, degraded)
    assert [d.switch for d in diff.switches] == ["l1", "l2", "s1"]
    assert diff.change_count == 3
    for switch_diff in diff.switches:
        (modified,) = switch_diff.groups.modifies
        assert modified == degraded.switch(switch_diff.switch).group(modified.group_id)


def test_restoring_a_link_reverses_the_cut(leaf_spine, link_between):
    healthy = compute_intent(leaf_spine)
    degraded = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    restore = diff_intents(degraded, healthy)
    assert [d.switch for d in restore.switches] == ["l1", "l2", "s1"]
    assert restore.switch("l1").groups.modifies == (healthy.switch("l1").group(3),)


def test_losing_a_destination_deletes_its_group_after_its_routes(leaf_spine, link_between):
    down = {link_between(leaf_spine, "l2", spine) for spine in ("s1", "s2", "s3", "s4")}
    diff = diff_intents(compute_intent(leaf_spine), compute_intent(leaf_spine, down))
    l1 = diff.switch("l1")
    assert [group.group_id for group in l1.groups.deletes] == [3]
    assert {route.next_id for route in l1.routes_v4.deletes} == {3}
    assert len(l1.routes_v4.deletes) == 3  # h3, h4 and l2's /24
    assert not l1.members.deletes  # members stay, ready for the link's return


def test_a_switch_that_leaves_the_topology_has_everything_deleted(leaf_spine):
    intent = compute_intent(leaf_spine)
    s4 = intent.switch("s4")
    smaller = replace(intent, switches=tuple(s for s in intent.switches if s.switch != "s4"))
    diff = diff_intents(intent, smaller)
    (removed,) = diff.switches
    assert removed.switch == "s4"
    assert removed.groups.deletes == s4.groups
    assert removed.routes_v6.deletes == s4.routes_v6
    assert removed.cpu_port is None


def test_changed_settings_show_up_as_port_dscp_and_setting_changes(leaf_spine):
    document = explicit_document(leaf_spine)
    document["settings"]["cpu_port"] = 200
    document["settings"]["dscp"]["control"] = 40
    document["settings"]["ecn"]["min_threshold"] = 5
    changed = load_topology_text(dump_document(document))
    diff = diff_switch(
        compute_intent(leaf_spine).switch("s1"), compute_intent(changed).switch("s1")
    )
    assert diff.cpu_port == 200
    assert diff.lldp is None
    assert [rule.dscp for rule in diff.dscp_rules.inserts] == [40]
    assert [rule.dscp for rule in diff.dscp_rules.deletes] == [46]
    assert [port.ecn_min_threshold for port in diff.ports.modifies] == [5, 5]
    assert len(diff.groups) == 0


def test_diffing_two_different_switches_is_refused(leaf_spine):
    intent = compute_intent(leaf_spine)
    with pytest.raises(ValueError, match="cannot diff"):
        diff_switch(intent.switch("l1"), intent.switch("l2"))
    with pytest.raises(ValueError, match="at least one"):
        diff_switch(None, None)
