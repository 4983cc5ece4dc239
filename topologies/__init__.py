"""Testbed topologies: the YAML format, its validation, the generator and the shipped presets.

Typical use::

    from topologies import load_topology
    topology = load_topology("leaf-spine")      # a preset name or a path

The format is documented in ``topologies/FORMAT.md``.
"""

from topologies.errors import Problem, TopologyError
from topologies.graph import fabric_graph, topology_graph
from topologies.loader import load_topology_file, load_topology_text
from topologies.model import (
    EcnSettings,
    Endpoint,
    Host,
    Link,
    LinkId,
    LinkParams,
    LldpSettings,
    Nic,
    Plane,
    QueueSettings,
    Role,
    Settings,
    Switch,
    Topology,
)
from topologies.presets import PRESETS, load_topology, resolve_topology

__all__ = [
    "PRESETS",
    "EcnSettings",
    "Endpoint",
    "Host",
    "Link",
    "LinkId",
    "LinkParams",
    "LldpSettings",
    "Nic",
    "Plane",
    "Problem",
    "QueueSettings",
    "Role",
    "Settings",
    "Switch",
    "Topology",
    "TopologyError",
    "fabric_graph",
    "load_topology",
    "load_topology_file",
    "load_topology_text",
    "resolve_topology",
    "topology_graph",
]
