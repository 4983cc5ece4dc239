"""Intent of the two-plane fabric: each plane routes its own addresses and nothing else."""

from __future__ import annotations

from ipaddress import IPv4Network

from controller.intent import compute_intent


def test_each_plane_routes_only_its_own_addresses(two_plane):
    intent = compute_intent(two_plane)
    for switch in two_plane.switches:
        plane_prefix = two_plane.plane(switch.plane).ipv4_prefix
        routes = intent.switch(switch.name).routes_v4
        assert routes
        assert all(route.prefix.subnet_of(plane_prefix) for route in routes)


def test_every_host_is_reachable_on_both_planes(two_plane):
    intent = compute_intent(two_plane)
    for host in two_plane.hosts:
        for nic in host.nics:
            leaf = "p1l2" if nic.plane == 1 else "p0l2"
            group = intent.switch(leaf).lookup(nic.ipv4.ip)
            assert group is not None, f"{host.name} {nic.name} unreachable from {leaf}"


def test_a_leaf_hashes_over_the_two_spines_of_its_own_plane(two_plane):
    intent = compute_intent(two_plane)
    h3_plane1 = two_plane.host("h3").nics[1]
    group = intent.switch("p1l1").lookup(h3_plane1.ipv4.ip)
    assert group.ports == (3, 4)
    assert [m.dst_mac for m in group.members] == [
        two_plane.switch("p1s1").port_mac(1),
        two_plane.switch("p1s2").port_mac(1),
    ]


def test_a_plane_zero_switch_has_no_route_into_plane_one(two_plane):
    p0l1 = compute_intent(two_plane).switch("p0l1")
    assert p0l1.lookup(two_plane.host("h3").nics[1].ipv4.ip) is None
    assert p0l1.routes_v4
    assert all(not r.prefix.overlaps(IPv4Network("10.1.0.0/16")) for r in p0l1.routes_v4)


def test_both_planes_have_the_same_shape(two_plane):
    intent = compute_intent(two_plane)
    for name in ("l1", "l2", "s1", "s2"):
        plane0, plane1 = intent.switch(f"p0{name}"), intent.switch(f"p1{name}")
        assert [g.ports for g in plane0.groups] == [g.ports for g in plane1.groups]
        assert len(plane0.routes_v6) == len(plane1.routes_v6)
