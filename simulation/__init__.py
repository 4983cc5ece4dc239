"""Topology fabrics in simulated time: the testbed's topology files, the controller's intent and
the agent's real MRC core, with switches modelled after ``mrc.p4`` instead of run.

``agent.sim`` joins two hosts by abstract paths; this package builds a whole fabric from a
:class:`topologies.model.Topology`: one :class:`~simulation.switch.SimSwitch` per switch holding
the routes and next-hop groups :func:`controller.intent.routed_intent` computes, per-port egress
queues (``agent.sim.link.Link``: rate, depth, ECN, trimming to the priority queue), links that
fail and recover, and a routing policy that reacts as the controller's does. Hosts are
``agent.sim.host.SimHost``: an ``Endpoint`` driven as the socket runtime drives it.
"""

from simulation.fabric import FabricStats, SimFabric
from simulation.links import link_config
from simulation.switch import SimSwitch

__all__ = ["FabricStats", "SimFabric", "SimSwitch", "link_config"]
