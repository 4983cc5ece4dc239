"""Which switch-to-switch hops a flow between two hosts can take, from the topology alone.

The fabric routes over every shortest path between two leaves (ECMP, and MRC's EVs pick
among them), so a flow may cross any hop of any shortest path. Two flows can only slow each
other down on a hop they both may cross: this is how an experiment checks that the flows it
sets against each other really share links, before it spends minutes measuring them.
"""

from __future__ import annotations

from itertools import pairwise

import networkx as nx

from topologies.graph import fabric_graph
from topologies.model import Topology


def fabric_hops(topology: Topology, source: str, destination: str) -> frozenset[str]:
    """The directed switch-to-switch hops (``"l1->s2"``) a flow from host ``source`` to host
    ``destination`` may cross, over their first NICs; empty when both sit on one switch."""
    start = topology.host(source).nics[0].switch
    end = topology.host(destination).nics[0].switch
    if start == end:
        return frozenset()
    graph = fabric_graph(topology)
    try:
        paths = list(nx.all_shortest_paths(graph, start, end))
    except nx.NetworkXNoPath:
        raise ValueError(f"{topology.name}: no path from {source} to {destination}") from None
    return frozenset(f"{u}->{v}" for path in paths for u, v in pairwise(path))
