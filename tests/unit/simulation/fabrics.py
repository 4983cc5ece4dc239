"""Fabrics the simulation tests share."""

from __future__ import annotations

from agent.io.transport import roce_setup_for
from controller.intent.policy import RoutingPolicy
from simulation import SimFabric
from topologies import load_topology
from topologies.link_lookup import find_link


def leaf_spine_cut_static(transport: str, cut_at: float) -> SimFabric:
    """leaf-spine-4x4 with ``l1``-``s1`` cut at ``cut_at`` and never rerouted (``static``: only
    the link's two ends skip it), its hosts on MRC or on RoCE's default profile."""
    topology = load_topology("leaf-spine-4x4")
    roce = roce_setup_for(topology.settings.dscp) if transport == "roce" else None
    fabric = SimFabric(topology, roce=roce, policy=RoutingPolicy.parse("static"))
    fabric.fail_at(cut_at, find_link(topology, "l1", "s1").id)
    return fabric
