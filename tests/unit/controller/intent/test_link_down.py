"""Recomputation with links down: every switch avoids next hops that lost the destination."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from controller.intent import compute_intent
from topologies import Endpoint, LinkId


def test_the_far_leaf_stops_hashing_onto_a_spine_that_lost_the_destination(
    leaf_spine, link_between
):
    # l2-s1 fails; l1 is not an end of that link but must stop sending l2's traffic to s1.
    intent = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    assert intent.switch("l1").lookup(ip_address("10.0.2.1")).ports == (4, 5, 6)
    assert intent.switch("l2").lookup(ip_address("10.0.1.1")).ports == (4, 5, 6)


def test_traffic_between_unaffected_destinations_keeps_every_spine(leaf_spine, link_between):
    intent = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    # l1's own hosts are not behind the failed link.
    assert intent.switch("l1").lookup(ip_address("10.0.1.2")).ports == (2,)
    assert intent.switch("s2").lookup(ip_address("10.0.2.1")).ports == (2,)


def test_a_spine_that_lost_a_leaf_falls_back_on_the_shortest_remaining_path(
    leaf_spine, link_between
):
    # In-flight packets at s1 for l2 go back down to l1, which sends them up another spine.
    intent = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    assert intent.switch("s1").lookup(ip_address("10.0.2.1")).ports == (1,)


def test_a_failure_changes_group_members_and_nothing_else(leaf_spine, link_between):
    healthy = compute_intent(leaf_spine)
    degraded = compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    for before, after in zip(healthy.switches, degraded.switches, strict=True):
        assert before.routes_v4 == after.routes_v4
        assert before.routes_v6 == after.routes_v6
        assert before.members == after.members
        assert [g.group_id for g in before.groups] == [g.group_id for g in after.groups]


def test_restoring_the_link_restores_the_original_intent(leaf_spine, link_between):
    healthy = compute_intent(leaf_spine)
    compute_intent(leaf_spine, {link_between(leaf_spine, "l2", "s1")})
    assert compute_intent(leaf_spine, set()) == healthy


def test_a_leaf_cut_off_from_every_spine_is_unreachable_and_unrouted(leaf_spine, link_between):
    down = {link_between(leaf_spine, "l2", spine) for spine in ("s1", "s2", "s3", "s4")}
    intent = compute_intent(leaf_spine, down)
    l1 = intent.switch("l1")
    assert l1.lookup(ip_address("10.0.2.1")) is None
    assert l1.lookup(ip_address("fd00:0:2::2")) is None
    assert [g.group_id for g in l1.groups] == [1, 2]  # only its own hosts remain
    # l2 still delivers locally.
    assert intent.switch("l2").lookup(ip_address("10.0.2.2")).ports == (2,)


def test_a_down_host_link_removes_that_hosts_routes_but_keeps_the_leaf_prefix(
    leaf_spine, link_between
):
    intent = compute_intent(leaf_spine, {link_between(leaf_spine, "h3", "l2")})
    h3 = leaf_spine.host("h3").nics[0]
    l1 = intent.switch("l1")
    assert any(route.prefix.prefixlen == 32 for route in l1.routes_v4)  # other hosts' remain
    assert all(
        route.prefix.prefixlen != 32 or h3.ipv4.ip not in route.prefix for route in l1.routes_v4
    )
    # The /24 still leads to l2, which has no route and drops the packet.
    assert l1.lookup(h3.ipv4.ip).ports == (3, 4, 5, 6)
    l2 = intent.switch("l2")
    assert l2.lookup(h3.ipv4.ip) is None
    assert 1 not in {group.group_id for group in l2.groups}


def test_in_a_fat_tree_an_aggregation_in_another_pod_drops_the_core_that_lost_the_pod(
    fat_tree, link_between
):
    # a1 (pod 1) loses core c1. a3 (pod 2) also uplinks to c1 but is not an end of the failed link:
    # it must stop sending pod 1's traffic to c1 (a3 port 3).
    intent = compute_intent(fat_tree, {link_between(fat_tree, "a1", "c1")})
    h1 = fat_tree.host("h1").nics[0].ipv4.ip
    assert intent.switch("a3").lookup(h1).ports == (4,)
    assert intent.switch("a4").lookup(h1).ports == (3, 4)  # a4 uses c3/c4, unaffected
    assert intent.switch("a1").lookup(fat_tree.host("h5").nics[0].ipv4.ip).ports == (4,)
    # The edges keep both aggregations: each still has a shortest path to pod 1.
    assert intent.switch("e3").lookup(h1).ports == (3, 4)


def test_down_links_can_be_given_in_any_order_and_collection(leaf_spine):
    link = LinkId.between(Endpoint("s1", 2), Endpoint("l2", 3))
    assert compute_intent(leaf_spine, [link]) == compute_intent(leaf_spine, frozenset({link}))


def test_a_link_the_topology_does_not_have_is_refused(leaf_spine):
    bogus = LinkId.between(Endpoint("l1", 9), Endpoint("s1", 9))
    with pytest.raises(ValueError, match="not in topology 'leaf-spine'"):
        compute_intent(leaf_spine, {bogus})
