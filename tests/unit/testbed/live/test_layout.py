"""The live page's layout is readable for every shipped preset and for fat-trees up to k=8
(one and two planes): every node placed, no two nodes closer than a node's size, tiers in
rows that rise with the tier, hosts between their planes' leaves, aggregation over its pod."""

from __future__ import annotations

import itertools
import math

import pytest

from testbed.live.layout import NODE_SIZE, layout, natural_key
from topologies import load_topology
from topologies.document import dump_document
from topologies.generator import fat_tree
from topologies.loader import load_topology_text
from topologies.presets import PRESETS


def _fat_tree(k: int, planes: int):
    return load_topology_text(dump_document(fat_tree(k, planes=planes, name=f"ft{k}x{planes}")))


TOPOLOGIES = [pytest.param(lambda n=name: load_topology(n), id=name) for name in PRESETS] + [
    pytest.param(lambda k=k, p=p: _fat_tree(k, p), id=f"fat-tree-k{k}-planes{p}")
    for k in (4, 6, 8)
    for p in (1, 2)
]


@pytest.mark.parametrize("make", TOPOLOGIES)
def test_every_node_is_placed_apart_from_every_other(make):
    topology = make()
    positions = layout(topology)
    names = {s.name for s in topology.switches} | {h.name for h in topology.hosts}
    assert set(positions) == names
    points = [(p.x, p.y) for p in positions.values()]
    assert all(math.isfinite(x) and math.isfinite(y) for x, y in points)
    closest = min(math.dist(a, b) for a, b in itertools.combinations(points, 2))
    assert closest >= NODE_SIZE


@pytest.mark.parametrize("make", TOPOLOGIES)
def test_tiers_are_rows_away_from_the_hosts_in_tier_order(make):
    topology = make()
    positions = layout(topology)
    host_ys = {positions[h.name].y for h in topology.hosts}
    for plane in {s.plane for s in topology.switches}:
        rows: dict[int, set[float]] = {}
        for switch in topology.switches:
            if switch.plane == plane:
                rows.setdefault(switch.tier, set()).add(positions[switch.name].y)
        assert all(len(ys) == 1 for ys in rows.values())  # one row per tier
        distances = [min(abs(y - h) for h in host_ys) for _, ys in sorted(rows.items()) for y in ys]
        assert distances == sorted(distances) and len(set(distances)) == len(distances)


def test_two_planes_put_each_host_between_its_leaves():
    topology = load_topology("two-plane")
    positions = layout(topology)
    for host in topology.hosts:
        ys = sorted(positions[nic.switch].y for nic in host.nics)
        assert ys[0] < positions[host.name].y < ys[-1]


def test_a_fat_trees_aggregation_sits_over_its_pod():
    topology = _fat_tree(8, 1)
    positions = layout(topology)
    for switch in topology.switches:
        if switch.role.value != "agg":
            continue
        pod = [
            link.a.node if link.b.node == switch.name else link.b.node
            for link in topology.links
            if switch.name in (link.a.node, link.b.node)
        ]
        edges = [positions[n].x for n in pod if topology.switch(n).tier == 0]
        assert min(edges) <= positions[switch.name].x <= max(edges)


def test_names_sort_naturally():
    assert sorted(["s10", "s2", "s1"], key=natural_key) == ["s1", "s2", "s10"]
