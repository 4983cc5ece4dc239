"""Intent of the k=4 fat-tree: two-way ECMP up, a single way down."""

from __future__ import annotations

import pytest

from controller.intent import compute_intent


@pytest.fixture(scope="module")
def intent(fat_tree):
    return compute_intent(fat_tree)


def _address(topology, host):
    return topology.host(host).nics[0].ipv4.ip


def test_an_edge_switch_spreads_traffic_for_another_pod_over_both_aggregations(fat_tree, intent):
    # e1 (pod 1) to h16 on e8 (pod 4): ports 3 and 4 go to a1 and a2.
    group = intent.switch("e1").lookup(_address(fat_tree, "h16"))
    assert group.ports == (3, 4)
    assert [m.dst_mac for m in group.members] == [
        fat_tree.switch("a1").port_mac(1),
        fat_tree.switch("a2").port_mac(1),
    ]


def test_an_edge_switch_reaches_its_pod_neighbour_over_both_aggregations(fat_tree, intent):
    assert intent.switch("e1").lookup(_address(fat_tree, "h3")).ports == (3, 4)


def test_an_aggregation_switch_spreads_other_pods_traffic_over_its_two_cores(fat_tree, intent):
    assert intent.switch("a1").lookup(_address(fat_tree, "h9")).ports == (3, 4)


def test_an_aggregation_switch_delivers_down_its_own_pod_directly(fat_tree, intent):
    assert intent.switch("a1").lookup(_address(fat_tree, "h3")).ports == (2,)


def test_a_core_switch_has_exactly_one_way_into_each_pod(fat_tree, intent):
    core = intent.switch("c1")
    for host in ("h1", "h5", "h9", "h13"):
        (member,) = core.lookup(_address(fat_tree, host)).members
        pod = (int(host[1:]) - 1) // 4 + 1
        assert member.egress_port == pod


def test_group_sizes_follow_the_tiers(intent):
    sizes = {
        switch.switch: sorted({len(group.members) for group in switch.groups})
        for switch in intent.switches
    }
    assert all(sizes[f"e{i}"] == [1, 2] for i in range(1, 9))  # hosts: 1, other edges: 2
    assert all(sizes[f"a{i}"] == [1, 2] for i in range(1, 9))  # own edges: 1, other pods: 2
    assert all(sizes[f"c{i}"] == [1] for i in range(1, 5))


def test_every_switch_routes_all_sixteen_hosts_and_the_other_edge_prefixes(intent):
    for switch in intent.switches:
        host_routes = [r for r in switch.routes_v4 if r.prefix.prefixlen == 32]
        prefixes = [r for r in switch.routes_v4 if r.prefix.prefixlen == 24]
        assert len(host_routes) == 16
        assert len(prefixes) == (7 if switch.switch.startswith("e") else 8)
