"""Generated fabrics have the documented shape, and what the generator writes always loads."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import LinkParams, Role, Topology, load_topology_text
from topologies.document import dump_document
from topologies.generator import fat_tree, leaf_spine


def _load(document: dict) -> Topology:
    return load_topology_text(dump_document(document), source="<generated>")


def _neighbours(topology: Topology, name: str) -> Counter[str]:
    return Counter(
        link.far_end(name).node for link in topology.all_links if name in (link.a.node, link.b.node)
    )


def test_leaf_spine_joins_every_leaf_to_every_spine_once():
    topology = _load(leaf_spine(3, 4, 2))
    leaves = [s.name for s in topology.switches if s.role is Role.LEAF]
    spines = [s.name for s in topology.switches if s.role is Role.SPINE]
    assert leaves == ["l1", "l2", "l3"]
    assert spines == ["s1", "s2", "s3", "s4"]
    assert len(topology.links) == 12
    for leaf in leaves:
        neighbours = _neighbours(topology, leaf)
        assert all(neighbours[spine] == 1 for spine in spines)
        assert sum(1 for node in neighbours if node.startswith("h")) == 2


def test_leaf_spine_ports_follow_the_documented_numbering():
    topology = _load(leaf_spine(2, 4, 2))
    assert topology.link_at("l1", 1).far_end("l1").node == "h1"
    assert topology.link_at("l1", 2).far_end("l1").node == "h2"
    assert str(topology.link_at("l1", 3).far_end("l1")) == "s1:1"
    assert str(topology.link_at("l2", 6).far_end("l2")) == "s4:2"


def test_fat_tree_k4_has_the_textbook_shape():
    topology = _load(fat_tree(4))
    roles = Counter(switch.role for switch in topology.switches)
    assert roles == {Role.LEAF: 8, Role.AGG: 8, Role.CORE: 4}
    assert len(topology.hosts) == 16
    assert len(topology.links) == 32
    assert {switch.tier for switch in topology.switches if switch.role is Role.CORE} == {2}
    # Every port of every switch is used: k ports each, no more.
    assert all(topology.switch_ports(s.name) == (1, 2, 3, 4) for s in topology.switches)
    # Each core reaches every pod exactly once, through core port = pod number.
    for core in ("c1", "c2", "c3", "c4"):
        pods = [topology.link_at(core, pod).far_end(core).node for pod in (1, 2, 3, 4)]
        pod_of = {f"a{i}": (i - 1) // 2 + 1 for i in range(1, 9)}
        assert [pod_of[agg] for agg in pods] == [1, 2, 3, 4]


def test_every_host_gets_one_nic_per_plane_on_that_planes_fabric():
    topology = _load(leaf_spine(2, 2, 2, planes=3))
    assert [plane.id for plane in topology.planes] == [0, 1, 2]
    assert len(topology.switches) == 12
    for host in topology.hosts:
        assert [nic.plane for nic in host.nics] == [0, 1, 2]
        assert [nic.name for nic in host.nics] == ["eth0", "eth1", "eth2"]
        assert [topology.switch(nic.switch).plane for nic in host.nics] == [0, 1, 2]
    assert topology.host("h1").nics[1].switch == "p1l1"
    assert str(topology.host("h1").nics[1].ipv4) == "10.1.1.1/24"


def test_link_defaults_are_written_into_the_settings():
    params = LinkParams(bandwidth_mbps=10.0, queue_depth=100, queue_rate_pps=200)
    topology = _load(leaf_spine(2, 2, 1, link_defaults=params))
    assert topology.settings.link_defaults == params
    assert {link.params for link in topology.all_links} == {params}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: leaf_spine(0, 2, 2), "leaves must be at least 1"),
        (lambda: leaf_spine(2, 200, 60), "needs ports above 254"),
        (lambda: fat_tree(5), "k must be even"),
        (lambda: leaf_spine(2, 2, 2, planes=300), "at most 256 planes"),
    ],
)
def test_impossible_parameters_are_refused_with_the_reason(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@settings(max_examples=15, deadline=None)
@given(
    leaves=st.integers(1, 6),
    spines=st.integers(1, 5),
    hosts=st.integers(1, 5),
    planes=st.integers(1, 3),
)
def test_generated_leaf_spines_always_validate(leaves, spines, hosts, planes):
    topology = _load(leaf_spine(leaves, spines, hosts, planes=planes))
    assert len(topology.hosts) == leaves * hosts
    assert len(topology.links) == leaves * spines * planes
    assert len(topology.switches) == (leaves + spines) * planes


@pytest.mark.parametrize("k", [2, 4, 6])
def test_generated_fat_trees_validate(k):
    topology = _load(fat_tree(k, planes=2 if k == 2 else 1))
    assert len(topology.hosts) == k**3 // 4
