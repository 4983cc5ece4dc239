"""Intent of the 2x4 leaf-spine with every link up: ECMP over all spines, host routes everywhere."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network, ip_address

from controller.intent import compute_intent


def test_a_leaf_hashes_traffic_for_the_other_leaf_over_all_four_spines(leaf_spine):
    l1 = compute_intent(leaf_spine).switch("l1")
    group = l1.lookup(ip_address("10.0.2.1"))
    assert group is not None
    assert group.ports == (3, 4, 5, 6)
    for member, spine in zip(group.members, ("s1", "s2", "s3", "s4"), strict=True):
        assert member.src_mac == leaf_spine.switch("l1").port_mac(member.egress_port)
        assert member.dst_mac == leaf_spine.switch(spine).port_mac(1)
        assert member.watch_port == member.egress_port


def test_a_leaf_delivers_to_its_own_hosts_with_the_host_mac(leaf_spine):
    l1 = compute_intent(leaf_spine).switch("l1")
    h2 = leaf_spine.host("h2").nics[0]
    group = l1.lookup(h2.ipv6.ip)
    assert group is not None
    (member,) = group.members
    assert (member.egress_port, member.dst_mac) == (2, h2.mac)


def test_a_spine_has_one_next_hop_per_leaf(leaf_spine):
    s3 = compute_intent(leaf_spine).switch("s3")
    assert [group.ports for group in s3.groups] == [(1,), (2,)]
    assert s3.lookup(ip_address("10.0.1.2")).ports == (1,)
    assert s3.lookup(ip_address("fd00:0:2::1")).ports == (2,)


def test_group_ids_number_local_host_ports_then_remote_leaves(leaf_spine):
    l2 = compute_intent(leaf_spine).switch("l2")
    assert [(group.group_id, group.ports) for group in l2.groups] == [
        (1, (1,)),
        (2, (2,)),
        (3, (3, 4, 5, 6)),
    ]


def test_every_switch_routes_every_host_and_every_other_leafs_prefix(leaf_spine):
    intent = compute_intent(leaf_spine)
    host_v4 = {IPv4Network(f"{nic.ipv4.ip}/32") for _, nic in leaf_spine.nics()}
    host_v6 = {IPv6Network(f"{nic.ipv6.ip}/128") for _, nic in leaf_spine.nics()}
    for switch in intent.switches:
        v4 = {route.prefix for route in switch.routes_v4}
        v6 = {route.prefix for route in switch.routes_v6}
        assert host_v4 <= v4
        assert host_v6 <= v6
    l1 = intent.switch("l1")
    assert {r.prefix for r in l1.routes_v4} - host_v4 == {IPv4Network("10.0.2.0/24")}
    assert {r.prefix for r in l1.routes_v6} - host_v6 == {IPv6Network("fd00:0:2::/64")}
    s1 = intent.switch("s1")
    assert {r.prefix for r in s1.routes_v4} - host_v4 == {
        IPv4Network("10.0.1.0/24"),
        IPv4Network("10.0.2.0/24"),
    }


def test_every_route_points_at_an_existing_group(leaf_spine):
    for switch in compute_intent(leaf_spine).switches:
        group_ids = {group.group_id for group in switch.groups}
        assert {route.next_id for route in switch.routes_v4 + switch.routes_v6} <= group_ids


def test_members_cover_every_used_port_with_a_stable_index(leaf_spine):
    intent = compute_intent(leaf_spine)
    l1 = intent.switch("l1")
    assert [(m.member_index, m.egress_port) for m in l1.members] == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (5, 6),
    ]
    for switch in intent.switches:
        known = set(switch.members)
        assert all(set(group.members) <= known for group in switch.groups)


def test_tables_are_sorted_by_key(leaf_spine):
    for switch in compute_intent(leaf_spine).switches:
        assert list(switch.routes_v4) == sorted(switch.routes_v4)
        assert list(switch.routes_v6) == sorted(switch.routes_v6)
        assert [g.group_id for g in switch.groups] == sorted(g.group_id for g in switch.groups)
        assert [p.port for p in switch.ports] == sorted(p.port for p in switch.ports)


def test_the_same_inputs_always_give_the_same_intent(leaf_spine):
    assert compute_intent(leaf_spine) == compute_intent(leaf_spine)
