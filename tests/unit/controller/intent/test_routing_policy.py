"""Routing policies against the shipped topologies: what each switch holds after a cut at its
own port (local), a cut elsewhere (remote), and a spine's last link toward a leaf going down.

``routed_intent(topology, routed_down, down)`` is every policy: ``static`` routes with no down
link known fabric-wide, ``reactive`` with all of them, ``converge`` with those of its delay ago
(tests/unit/controller/app/test_fabric_routing.py drives the delay); every switch prunes its own
dead next hops in all three."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from controller.intent import (
    DEFAULT_CONVERGE_S,
    RoutingMode,
    RoutingPolicy,
    compute_intent,
    prune_dead_next_hops,
    routed_intent,
)


def static(topology, *down):
    return routed_intent(topology, frozenset(), frozenset(down))


def reactive(topology, *down):
    return routed_intent(topology, frozenset(down), frozenset(down))


def ip(topology, host: str, nic: int = 0):
    return topology.host(host).nics[nic].ipv4.ip


# -- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mode", "delay", "shown"),
    [
        ("static", RoutingMode.STATIC, 0.0, "static"),
        ("reactive", RoutingMode.REACTIVE, 0.0, "reactive"),
        ("converge", RoutingMode.CONVERGE, DEFAULT_CONVERGE_S, "converge:3"),
        ("converge:2.5", RoutingMode.CONVERGE, 2.5, "converge:2.5"),
        (" converge:0 ", RoutingMode.CONVERGE, 0.0, "converge:0"),
    ],
)
def test_a_policy_parses_from_its_name_and_prints_back(text, mode, delay, shown):
    policy = RoutingPolicy.parse(text)
    assert (policy.mode, policy.delay_s, str(policy)) == (mode, delay, shown)
    assert RoutingPolicy.parse(str(policy)) == policy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ospf", "static, reactive, converge or converge:SECONDS"),
        ("static:3", "takes no argument"),
        ("converge:soon", "takes seconds"),
        ("converge:-1", "0 seconds or more"),
        ("converge:nan", "0 seconds or more"),
        ("", "static, reactive"),
    ],
)
def test_a_bad_policy_is_refused_with_what_is_valid(text, message):
    with pytest.raises(ValueError, match=message):
        RoutingPolicy.parse(text)


def test_the_default_policy_is_reactive():
    assert RoutingPolicy() == RoutingPolicy.parse("reactive")


# -- leaf-spine ----------------------------------------------------------------------------------


def test_no_link_down_is_the_full_topologys_intent_under_every_policy(leaf_spine):
    healthy = compute_intent(leaf_spine)
    assert static(leaf_spine) == healthy
    assert reactive(leaf_spine) == healthy


def test_a_local_cut_static_prunes_the_two_ends_and_leaves_the_far_leaf_hashing_into_it(
    leaf_spine, link_between
):
    cut = link_between(leaf_spine, "l1", "s1")
    intent = static(leaf_spine, cut)
    # l1 stops using its own dead uplink toward l2 (ports 3..6 are s1..s4).
    assert intent.switch("l1").lookup(ip(leaf_spine, "h3")).ports == (4, 5, 6)
    # s1's last link toward l1 is dead: s1 drops l1's traffic (group and routes gone) ...
    assert intent.switch("s1").lookup(ip(leaf_spine, "h1")) is None
    assert intent.switch("s1").lookup(ip(leaf_spine, "h3")).ports == (2,)
    # ... and l2 still hashes some of it onto s1: nothing is recomputed fabric-wide.
    assert intent.switch("l2").lookup(ip(leaf_spine, "h1")).ports == (3, 4, 5, 6)
    healthy = compute_intent(leaf_spine)
    for name in ("l2", "s2", "s3", "s4"):
        assert intent.switch(name) == healthy.switch(name)


def test_a_local_cut_reactive_routes_the_far_leaf_around_it(leaf_spine, link_between):
    cut = link_between(leaf_spine, "l1", "s1")
    intent = reactive(leaf_spine, cut)
    assert intent == compute_intent(leaf_spine, {cut})
    assert intent.switch("l1").lookup(ip(leaf_spine, "h3")).ports == (4, 5, 6)
    assert intent.switch("l2").lookup(ip(leaf_spine, "h1")).ports == (4, 5, 6)
    # s1 still reaches l1, the long way round (down to l2 and up another spine).
    assert intent.switch("s1").lookup(ip(leaf_spine, "h1")).ports == (2,)


def test_a_remote_cut_changes_nothing_on_the_source_leaf_under_static(leaf_spine, link_between):
    # l2-s1 is remote for l1: l1 keeps every spine toward l2, s1 among them.
    cut = link_between(leaf_spine, "l2", "s1")
    before = compute_intent(leaf_spine)
    intent = static(leaf_spine, cut)
    assert intent.switch("l1") == before.switch("l1")
    assert intent.switch("l1").lookup(ip(leaf_spine, "h3")).ports == (3, 4, 5, 6)
    assert intent.switch("l2").lookup(ip(leaf_spine, "h1")).ports == (4, 5, 6)
    # Under reactive, l1 is told to avoid s1.
    assert reactive(leaf_spine, cut).switch("l1").lookup(ip(leaf_spine, "h3")).ports == (4, 5, 6)


def test_a_spine_whose_last_link_toward_a_leaf_is_dead_holds_no_route_toward_that_leaf(
    leaf_spine, link_between
):
    cut = link_between(leaf_spine, "l2", "s1")
    s1 = static(leaf_spine, cut).switch("s1")
    l2_hosts = [ip(leaf_spine, "h3"), ip(leaf_spine, "h4"), ip_address("10.0.2.99")]
    assert all(s1.lookup(address) is None for address in l2_hosts)
    assert all(route.next_id in {g.group_id for g in s1.groups} for route in s1.routes_v4)
    assert all(route.next_id in {g.group_id for g in s1.groups} for route in s1.routes_v6)
    assert s1.lookup(ip(leaf_spine, "h1")).ports == (1,)
    assert s1.members == compute_intent(leaf_spine).switch("s1").members, "members stay"


def test_a_leaf_whose_every_uplink_is_dead_drops_the_group_and_its_routes(leaf_spine, link_between):
    cuts = [link_between(leaf_spine, "l1", spine) for spine in ("s1", "s2", "s3", "s4")]
    intent = static(leaf_spine, *cuts)
    l1 = intent.switch("l1")
    assert l1.lookup(ip(leaf_spine, "h3")) is None
    assert l1.lookup(ip_address("fd00:0:2::2")) is None
    assert [g.group_id for g in l1.groups] == [1, 2]
    assert l1.lookup(ip(leaf_spine, "h2")).ports == (2,), "local hosts still reached"
    # Static: l2 is not told, and keeps hashing l1's traffic onto the four spines, which drop it.
    assert intent.switch("l2").lookup(ip(leaf_spine, "h1")).ports == (3, 4, 5, 6)
    assert all(intent.switch(s).lookup(ip(leaf_spine, "h1")) is None for s in ("s1", "s2"))


def test_a_restored_link_brings_the_full_intent_back_under_static(leaf_spine, link_between):
    cut = link_between(leaf_spine, "l1", "s1")
    assert static(leaf_spine, cut) != compute_intent(leaf_spine)
    assert static(leaf_spine) == compute_intent(leaf_spine)


def test_converge_before_its_delay_is_static_and_after_it_is_reactive(leaf_spine, link_between):
    cut = link_between(leaf_spine, "l2", "s1")
    assert routed_intent(leaf_spine, frozenset(), {cut}) == static(leaf_spine, cut)
    assert routed_intent(leaf_spine, {cut}, {cut}) == reactive(leaf_spine, cut)


def test_a_link_restored_before_convergence_is_used_locally_at_once(leaf_spine, link_between):
    # The fabric-wide computation still routes around l2-s1, though the link is back: l2 and
    # s1 use it (their own ports are up), l1 still avoids s1 toward l2 until it converges.
    cut = link_between(leaf_spine, "l2", "s1")
    intent = routed_intent(leaf_spine, {cut}, frozenset())
    assert intent == compute_intent(leaf_spine, {cut})
    assert intent.switch("l1").lookup(ip(leaf_spine, "h3")).ports == (4, 5, 6)


def test_pruning_leaves_switches_without_a_dead_port_untouched(leaf_spine, link_between):
    healthy = compute_intent(leaf_spine)
    pruned = prune_dead_next_hops(healthy, leaf_spine, {link_between(leaf_spine, "l1", "s1")})
    assert pruned.switch("l2") is healthy.switch("l2")
    assert prune_dead_next_hops(healthy, leaf_spine, ()) is healthy


def test_a_dead_host_link_is_pruned_at_its_leaf_only_under_static(leaf_spine, link_between):
    cut = link_between(leaf_spine, "h3", "l2")
    h3 = ip(leaf_spine, "h3")
    intent = static(leaf_spine, cut)
    assert intent.switch("l2").lookup(h3) is None
    # l1 keeps its host route toward h3 (packets die at l2); reactive withdraws it.
    assert any(
        route.prefix.prefixlen == 32 and h3 in route.prefix
        for route in intent.switch("l1").routes_v4
    )
    assert not any(
        route.prefix.prefixlen == 32 and h3 in route.prefix
        for route in reactive(leaf_spine, cut).switch("l1").routes_v4
    )


# -- two-plane -----------------------------------------------------------------------------------


def test_two_plane_a_cut_in_plane_zero_leaves_plane_one_alone(two_plane, link_between):
    cut = link_between(two_plane, "p0l2", "p0s1")
    healthy = compute_intent(two_plane)
    for intent in (static(two_plane, cut), reactive(two_plane, cut)):
        for name in ("p1l1", "p1l2", "p1s1", "p1s2"):
            assert intent.switch(name) == healthy.switch(name)
    h3_plane0 = ip(two_plane, "h3", 0)
    # Remote for p0l1: static keeps both spines, reactive drops p0s1.
    assert static(two_plane, cut).switch("p0l1").lookup(h3_plane0).ports == (3, 4)
    assert reactive(two_plane, cut).switch("p0l1").lookup(h3_plane0).ports == (4,)
    # p0s1 lost its last link toward p0l2.
    assert static(two_plane, cut).switch("p0s1").lookup(h3_plane0) is None


def test_two_plane_a_nic_cut_is_pruned_at_its_leaf_and_the_other_plane_still_reaches_it(
    two_plane, link_between
):
    cut = link_between(two_plane, "h1", "p0l1")
    intent = static(two_plane, cut)
    assert intent.switch("p0l1").lookup(ip(two_plane, "h1", 0)) is None
    assert intent.switch("p1l1").lookup(ip(two_plane, "h1", 1)).ports == (1,)
    assert intent.switch("p1l2").lookup(ip(two_plane, "h1", 1)).ports == (3, 4)


# -- fat-tree ------------------------------------------------------------------------------------


def test_fat_tree_a_core_losing_its_only_link_into_a_pod_drops_that_pod_under_static(
    fat_tree, link_between
):
    cut = link_between(fat_tree, "a1", "c1")
    h1, h5 = ip(fat_tree, "h1"), ip(fat_tree, "h5")
    intent = static(fat_tree, cut)
    assert intent.switch("c1").lookup(h1) is None
    assert intent.switch("c1").lookup(h5).ports == (2,)
    assert intent.switch("a1").lookup(h5).ports == (4,)
    # a3 (pod 2) is not an end of the cut: static leaves it sending pod 1's traffic to c1.
    assert intent.switch("a3").lookup(h1).ports == (3, 4)
    assert reactive(fat_tree, cut).switch("a3").lookup(h1).ports == (4,)


def test_fat_tree_an_edge_sees_a_remote_cut_only_under_reactive(fat_tree, link_between):
    cut = link_between(fat_tree, "a3", "c1")
    h5 = ip(fat_tree, "h5")
    healthy = compute_intent(fat_tree)
    assert static(fat_tree, cut).switch("e1") == healthy.switch("e1")
    assert static(fat_tree, cut).switch("a1").lookup(h5).ports == (3, 4)
    assert reactive(fat_tree, cut).switch("a1").lookup(h5).ports == (4,)


def test_fat_tree_an_aggregation_with_every_core_link_dead_drops_inter_pod_traffic(
    fat_tree, link_between
):
    cuts = [link_between(fat_tree, "a1", core) for core in ("c1", "c2")]
    intent = static(fat_tree, *cuts)
    a1 = intent.switch("a1")
    assert a1.lookup(ip(fat_tree, "h5")) is None
    assert a1.lookup(ip(fat_tree, "h3")).ports == (2,), "intra-pod traffic still flows"
    # e1 still sends inter-pod traffic to a1 under static; reactive sends it all to a2.
    assert intent.switch("e1").lookup(ip(fat_tree, "h5")).ports == (3, 4)
    assert reactive(fat_tree, *cuts).switch("e1").lookup(ip(fat_tree, "h5")).ports == (4,)
