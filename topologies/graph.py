"""networkx views of a topology, with a set of links taken out (the ones that are down).

Parallel links between the same two switches are distinct paths with distinct ports, so the
views are multigraphs keyed by :class:`LinkId`. Each edge carries its :class:`Link` (``link``)
and the port it uses on each node (``ports``: node name -> port).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import networkx as nx

from topologies.model import Link, LinkId, Topology

NODE_KIND_SWITCH = "switch"
NODE_KIND_HOST = "host"


def topology_graph(topology: Topology, down: Collection[LinkId] = ()) -> nx.MultiGraph:
    """Switches and hosts as nodes (``kind``, and ``switch`` or ``host``), up links as edges."""
    graph = _switch_nodes(topology)
    for host in topology.hosts:
        graph.add_node(host.name, kind=NODE_KIND_HOST, host=host)
    _add_links(graph, topology.all_links, down)
    return graph


def fabric_graph(topology: Topology, down: Collection[LinkId] = ()) -> nx.MultiGraph:
    """Switches and the up switch-to-switch links only: the graph routing runs on.

    Hosts are left out because traffic must never transit a host, even one whose NICs sit on
    two switches of the same plane.
    """
    graph = _switch_nodes(topology)
    _add_links(graph, topology.links, down)
    return graph


def _switch_nodes(topology: Topology) -> nx.MultiGraph:
    graph = nx.MultiGraph(name=topology.name)
    for switch in topology.switches:
        graph.add_node(switch.name, kind=NODE_KIND_SWITCH, switch=switch)
    return graph


def _add_links(graph: nx.MultiGraph, links: Iterable[Link], down: Collection[LinkId]) -> None:
    down_ids = frozenset(down)
    for link in links:
        if link.id in down_ids:
            continue
        graph.add_edge(
            link.a.node,
            link.b.node,
            key=link.id,
            link=link,
            ports={link.a.node: link.a.port, link.b.node: link.b.port},
        )
