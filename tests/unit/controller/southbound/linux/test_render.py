"""An intent rendered for the kernel: every route's next hops are its group's members, each
member a gateway with a permanent neighbour to its MAC, and queue rates become tbf shapers
with an ECN marker under them where the kernel has one.
What the kernel cannot hold is named, not dropped silently."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network

import pytest

from controller.intent import compute_intent
from controller.southbound.linux.ecn import ce_threshold_marker, red_marker
from controller.southbound.linux.names import gateway_v4, gateway_v6
from controller.southbound.linux.render import render
from hostenv.tbf import tbf_parameters
from topologies import Topology, load_topology_text

SHAPED = """
name: shaped
planes:
- {id: 0}
switches:
- {name: l1, role: leaf, device_id: 1}
- {name: l2, role: leaf, device_id: 2}
- {name: s1, role: spine, device_id: 3}
- {name: s2, role: spine, device_id: 4}
hosts:
- name: h1
  nics:
  - {name: eth0, switch: l1, port: 1}
- name: h2
  nics:
  - {name: eth0, switch: l2, port: 1}
links:
- {a: 'l1:2', b: 's1:1'}
- {a: 'l1:3', b: 's2:1', queue_rate_pps: 500, queue_depth: 80}
- {a: 'l2:2', b: 's1:2'}
- {a: 'l2:3', b: 's2:2'}
"""


@pytest.fixture
def shaped() -> Topology:
    return load_topology_text(SHAPED, source="shaped")


def test_every_route_becomes_a_kernel_route_over_its_groups_members(
    leaf_spine: Topology,
) -> None:
    intent = compute_intent(leaf_spine).switch("l1")
    state = render(intent).state
    assert set(state.routes) == {route.prefix for route in intent.routes_v4 + intent.routes_v6}
    for route in intent.routes_v4 + intent.routes_v6:
        group = intent.group(route.next_id)
        kernel = state.routes[route.prefix]
        assert [hop.port for hop in kernel.nexthops] == sorted(group.ports)
        derive = gateway_v4 if isinstance(route.prefix, IPv4Network) else gateway_v6
        assert {hop.gateway for hop in kernel.nexthops} == {
            derive(member.member_index) for member in group.members
        }


def test_a_remote_leaf_prefix_is_spread_over_all_four_spines(leaf_spine: Topology) -> None:
    intent = compute_intent(leaf_spine).switch("l1")
    h3 = leaf_spine.host("h3").nics[0]
    route = render(intent).state.routes[IPv4Network(f"{h3.ipv4.ip}/32")]
    assert [hop.port for hop in route.nexthops] == [3, 4, 5, 6]


def test_each_member_gets_permanent_v4_and_v6_neighbours_to_its_mac(
    leaf_spine: Topology,
) -> None:
    intent = compute_intent(leaf_spine).switch("l1")
    neighbours = render(intent).state.neighbours
    assert len(neighbours) == 2 * len(intent.members)
    for member in intent.members:
        for address in (gateway_v4(member.member_index), gateway_v6(member.member_index)):
            neighbour = neighbours[(member.egress_port, address)]
            assert neighbour.mac == member.dst_mac.lower()


def test_a_down_link_leaves_its_member_out_of_routes_but_keeps_its_neighbour(
    leaf_spine: Topology, link_between
) -> None:
    down = link_between(leaf_spine, "l1", "s1")
    intent = compute_intent(leaf_spine, {down}).switch("l1")
    state = render(intent).state
    assert any(route.nexthops for route in state.routes.values())  # multipath routes remain
    assert all(3 not in [hop.port for hop in route.nexthops] for route in state.routes.values())
    assert any(port == 3 for port, _ in state.neighbours)


def test_queue_rate_becomes_a_tbf_and_unlimited_ports_get_none(shaped: Topology) -> None:
    state = render(compute_intent(shaped).switch("l1")).state
    assert state.shapers == {3: tbf_parameters(500, 80)}


def test_unsupported_features_are_named(leaf_spine: Topology) -> None:
    notes = render(compute_intent(leaf_spine).switch("l1")).unsupported
    text = "\n".join(notes)
    assert "ECN marking is off on ports [3, 4, 5, 6]" in text  # host ports 1, 2 have none
    assert "none of red, codel, fq_codel" in text
    assert "no packet trimming" in text
    assert "DSCP classes" in text
    assert "LLDP" in text


def test_a_shaped_fabric_port_is_marked_by_the_kernels_best_qdisc(shaped: Topology) -> None:
    intent = compute_intent(shaped).switch("l1")
    (port3,) = [port for port in intent.ports if port.port == 3]
    assert render(intent, ecn_qdiscs=["codel", "red"]).state.markers == {3: red_marker(port3)}
    assert render(intent, ecn_qdiscs=["codel"]).state.markers == {
        3: ce_threshold_marker("codel", port3)
    }


def test_an_unshaped_ecn_port_is_said_to_be_unmarked(shaped: Topology) -> None:
    rendering = render(compute_intent(shaped).switch("l1"), ecn_qdiscs=["red"])
    # Port 1 faces a host (ECN off by intent), port 2 is unshaped, port 3 is marked.
    assert 2 not in rendering.state.markers
    assert (
        "ECN marking is off on ports [2]: an unshaped port (queue rate 0) builds no queue"
        in "\n".join(rendering.unsupported)
    )


def test_no_marker_and_a_reason_where_the_kernel_has_no_marking_qdisc(shaped: Topology) -> None:
    rendering = render(compute_intent(shaped).switch("l1"), ecn_qdiscs=["tbf", "htb"])
    assert rendering.state.markers == {}
    assert any(
        note.startswith("ECN marking is off on ports [2, 3]: this kernel has none of")
        for note in rendering.unsupported
    )


def test_rendering_is_deterministic(leaf_spine: Topology) -> None:
    intent = compute_intent(leaf_spine).switch("s2")
    assert render(intent) == render(intent)


def test_ipv6_routes_use_link_local_gateways(leaf_spine: Topology) -> None:
    state = render(compute_intent(leaf_spine).switch("s1")).state
    v6 = [route for prefix, route in state.routes.items() if isinstance(prefix, IPv6Network)]
    assert v6
    assert all(hop.gateway.is_link_local for route in v6 for hop in route.nexthops)


def test_ecn_note_says_when_the_kernel_could_not_be_probed(leaf_spine: Topology) -> None:
    notes = render(compute_intent(leaf_spine).switch("l1"), ecn_qdiscs=None).unsupported
    assert any("could not be probed" in note for note in notes)


def test_srv6_routes_each_neighbours_usid_toward_it_and_shifts_or_ends_its_own(
    leaf_spine: Topology,
) -> None:
    from controller.southbound.linux.seg6 import Seg6Action, usid_locator
    from topologies.paths import PathMode

    intent = compute_intent(leaf_spine, path_mode=PathMode.SRV6).switch("l1")
    state = render(intent).state
    assert intent.usid_next_hops, "leaf-spine's leaves have spine neighbours"
    gateway_of = {
        (member.egress_port, member.dst_mac): gateway_v6(member.member_index)
        for member in intent.members
    }
    for hop in intent.usid_next_hops:
        kernel = state.routes[usid_locator(hop.block, hop.usid)]
        assert [(h.port, h.gateway) for h in kernel.nexthops] == [
            (hop.egress_port, gateway_of[hop.egress_port, hop.dst_mac])
        ]
        assert any(
            n.port == hop.egress_port and n.mac == hop.dst_mac for n in state.neighbours.values()
        )
    (own,) = intent.local_usids
    locator = usid_locator(own.block, own.usid)
    assert {(route.prefix, route.action) for route in state.seg6local.values()} == {
        (locator, Seg6Action.END),
        (IPv6Network((locator.network_address, 128)), Seg6Action.END_DT6),
    }


def test_ecmp_renders_no_usid_routes(leaf_spine: Topology) -> None:
    state = render(compute_intent(leaf_spine).switch("l1")).state
    assert not state.seg6local
    assert not [prefix for prefix in state.routes if str(prefix).startswith("fcbb:")]


def test_structured_ev_tables_are_named_as_having_no_kernel_rendering(leaf_spine: Topology) -> None:
    from topologies.paths import PathMode

    intent = compute_intent(leaf_spine, path_mode=PathMode.STRUCTURED).switch("l1")
    assert intent.ev_field is not None
    assert any("structured EV" in note for note in render(intent).unsupported)
    assert not any(
        "structured EV" in note
        for note in render(compute_intent(leaf_spine).switch("l1")).unsupported
    )
