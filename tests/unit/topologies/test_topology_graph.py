"""The networkx views hold the up links, keyed by link id, with the ports at each end."""

from __future__ import annotations

from topologies import Endpoint, LinkId, fabric_graph, load_topology_text, topology_graph


def test_topology_graph_holds_switches_hosts_and_every_link(small_fabric):
    topology = load_topology_text(small_fabric)
    graph = topology_graph(topology)
    assert {node: data["kind"] for node, data in graph.nodes(data=True)} == {
        "l1": "switch",
        "l2": "switch",
        "s1": "switch",
        "h1": "host",
        "h2": "host",
    }
    assert graph.number_of_edges() == 4
    data = graph.get_edge_data("l1", "s1")[topology.links[0].id]
    assert data["ports"] == {"l1": 2, "s1": 1}
    assert data["link"] == topology.links[0]


def test_fabric_graph_leaves_hosts_out(small_fabric):
    graph = fabric_graph(load_topology_text(small_fabric))
    assert set(graph.nodes) == {"l1", "l2", "s1"}
    assert graph.number_of_edges() == 2


def test_down_links_are_left_out_of_both_views(small_fabric):
    topology = load_topology_text(small_fabric)
    down = {LinkId.between(Endpoint("s1", 1), Endpoint("l1", 2)), topology.host_links[1].id}
    assert not fabric_graph(topology, down).has_edge("l1", "s1")
    full = topology_graph(topology, down)
    assert not full.has_edge("l2", "h2")
    assert full.has_edge("l1", "h1")


def test_parallel_links_are_separate_edges(small_fabric):
    text = small_fabric + '  - {a: "l1:3", b: "s1:3"}\n'
    graph = fabric_graph(load_topology_text(text))
    assert graph.number_of_edges("l1", "s1") == 2
