"""The whole fabric's intent from a topology and the set of links that are down.

Pure and deterministic: the same topology and link state always give equal intents, so the
controller can recompute from scratch on every event and let the diff find what changed.
"""

from __future__ import annotations

from collections.abc import Collection

from controller.intent.model import DscpRule, FabricIntent, LldpIntent, SwitchIntent
from controller.intent.path_tables import PathTableBuilder
from controller.intent.paths import shortest_path_ports
from controller.intent.ports import switch_ports
from controller.intent.routing import (
    edge_prefixes,
    edge_switches,
    nics_with_link_up,
    switch_members,
    switch_routing,
)
from topologies.graph import fabric_graph
from topologies.model import LinkId, Topology
from topologies.paths import PathMode


def compute_intent(
    topology: Topology,
    down: Collection[LinkId] = frozenset(),
    path_mode: PathMode = PathMode.ECMP,
) -> FabricIntent:
    """What every switch of ``topology`` should hold while the links in ``down`` are down.

    ``path_mode`` adds the static tables of structured EV or SRv6 routing
    (``controller.intent.path_tables``); they depend on the topology alone, not on ``down``.

    Raises ValueError for a link id the topology does not have: link discovery reports unknown
    links instead of routing over them, so one reaching here is a caller's mistake.
    """
    down_set = frozenset(down)
    known = {link.id for link in topology.all_links}
    unknown = sorted(down_set - known)
    if unknown:
        raise ValueError(f"links not in topology {topology.name!r}: {', '.join(map(str, unknown))}")
    graph = fabric_graph(topology, down_set)
    ports_toward = {
        edge.name: shortest_path_ports(graph, edge.name) for edge in edge_switches(topology)
    }
    prefixes = edge_prefixes(topology)
    live_nics = nics_with_link_up(topology, down_set)
    settings = topology.settings
    lldp = LldpIntent(settings.lldp.interval_ms, settings.lldp.miss_limit)
    dscp_rules = tuple(
        sorted(
            DscpRule(value, traffic_class)
            for traffic_class, value in settings.dscp.by_class().items()
        )
    )
    path_tables = PathTableBuilder(topology, path_mode)
    intents = []
    for switch in topology.switches:
        members = switch_members(topology, switch)
        tables = path_tables.for_switch(switch, members)
        groups, routes_v4, routes_v6 = switch_routing(
            topology, switch, members, ports_toward, prefixes, live_nics
        )
        intents.append(
            SwitchIntent(
                switch=switch.name,
                cpu_port=settings.cpu_port,
                lldp=lldp,
                dscp_rules=dscp_rules,
                ports=switch_ports(topology, switch),
                members=tuple(members[port] for port in sorted(members)),
                groups=groups,
                routes_v4=routes_v4,
                routes_v6=routes_v6,
                ev_field=tables.ev_field,
                ev_uplinks=tables.ev_uplinks,
                local_usids=tables.local_usids,
                usid_next_hops=tables.usid_next_hops,
            )
        )
    return FabricIntent(tuple(intents))
