"""Which ports lie on shortest paths toward a destination switch, given the links that are up.

This is what makes failover correct beyond the two ends of a failed link: distances are
computed on the graph without the down links, so a leaf drops a spine that can no longer reach
the destination even though the leaf's own link to that spine is fine.
"""

from __future__ import annotations

import networkx as nx


def shortest_path_ports(graph: nx.MultiGraph, destination: str) -> dict[str, tuple[int, ...]]:
    """For every switch that can reach ``destination``: its egress ports on shortest paths.

    ``graph`` is a fabric graph (``topologies.fabric_graph``) holding only links that are up;
    each edge's ``ports`` attribute maps a node to the port the link uses there. Switches that
    cannot reach the destination, and the destination itself, are absent.
    """
    distance = nx.single_source_shortest_path_length(graph, destination)
    ports: dict[str, tuple[int, ...]] = {}
    for node, hops in distance.items():
        if node == destination:
            continue
        ports[node] = tuple(
            sorted(
                data["ports"][node]
                for _, neighbour, data in graph.edges(node, data=True)
                if distance.get(neighbour) == hops - 1
            )
        )
    return ports
