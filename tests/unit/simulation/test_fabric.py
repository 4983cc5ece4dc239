"""The simulated fabric holds what the controller's intent says and reacts to a cut as the
routing policy does: the two ends skip the dead link at once; ``reactive`` reroutes the rest
of the fabric after the controller's reaction time, ``converge:S`` after S seconds,
``static`` never."""

from __future__ import annotations

import pytest

from controller.intent.policy import RoutingPolicy
from simulation import SimFabric
from topologies import LinkId, load_topology
from topologies.link_lookup import find_link
from topologies.paths import PathMode


def _h1(topology) -> bytes:
    return topology.host("h1").nics[0].ipv4.ip.packed


def _cut_s1_l1(policy: str, **options) -> tuple[SimFabric, LinkId, bytes]:
    topology = load_topology("leaf-spine")
    fabric = SimFabric(topology, policy=RoutingPolicy.parse(policy), **options)
    link = find_link(topology, "l1", "s1").id
    fabric.fail_at(0.1, link)
    return fabric, link, _h1(topology)


def test_every_switch_starts_with_a_route_to_every_host_of_its_plane():
    topology = load_topology("fat-tree")
    fabric = SimFabric(topology)
    for switch in fabric.switches.values():
        for _host, nic in topology.nics():
            assert switch.ports_toward(nic.ipv4.ip.packed), (switch.name, nic.name)


def test_the_ends_of_a_cut_lose_it_at_once_whatever_the_policy():
    fabric, _link, h1 = _cut_s1_l1("static")
    fabric.scheduler.run(until=0.1)
    h3 = fabric.topology.host("h3").nics[0].ipv4.ip.packed
    assert fabric.switches["l1"].ports_toward(h3) == (4, 5, 6)
    assert fabric.switches["s1"].ports_toward(h1) == ()  # its only way to l1 is gone


def test_static_routing_never_steers_the_other_leaf_away_from_the_spine_that_lost_its_leaf():
    fabric, _link, h1 = _cut_s1_l1("static")
    fabric.scheduler.run(until=10.0)
    assert fabric.switches["l2"].ports_toward(h1) == (3, 4, 5, 6)


def test_reactive_routing_steers_the_other_leaf_after_the_controllers_reaction_time():
    fabric, _link, h1 = _cut_s1_l1("reactive", reaction_s=0.02)
    fabric.scheduler.run(until=0.1 + 0.019)
    assert fabric.switches["l2"].ports_toward(h1) == (3, 4, 5, 6)
    fabric.scheduler.run(until=0.1 + 0.021)
    assert fabric.switches["l2"].ports_toward(h1) == (4, 5, 6)


def test_converge_routing_steers_after_its_delay_and_restoring_the_link_brings_the_spine_back():
    fabric, link, h1 = _cut_s1_l1("converge:2")
    fabric.restore_at(5.0, link)
    fabric.scheduler.run(until=2.09)
    assert fabric.switches["l2"].ports_toward(h1) == (3, 4, 5, 6)
    fabric.scheduler.run(until=2.11)
    assert fabric.switches["l2"].ports_toward(h1) == (4, 5, 6)
    fabric.scheduler.run(until=7.1)
    assert fabric.switches["l2"].ports_toward(h1) == (3, 4, 5, 6)
    assert fabric.switches["s1"].ports_toward(h1) == (1,)


def test_a_link_the_topology_does_not_have_is_refused_by_name():
    topology = load_topology("leaf-spine")
    other = find_link(load_topology("fat-tree"), "e1", "a1").id
    with pytest.raises(ValueError, match=r"no link .* in topology 'leaf-spine'"):
        SimFabric(topology).fail_at(1.0, other)


def test_path_modes_other_than_hashing_are_refused():
    with pytest.raises(ValueError, match="hashes only"):
        SimFabric(load_topology("leaf-spine"), path_mode=PathMode.SRV6)
