"""Next-hop members, groups and routes of one switch.

Group ids are a function of the topology alone: per switch, its host ports in port order get ids
1..n, then the other edge switches of its plane (switches with hosts, in file order) get n+1...
A link failure therefore changes the members of existing groups (a few modifies) and never
renumbers anything; a destination that becomes unreachable loses its group and the routes to
it, and gets both back, with the same id, when it returns.

Routes: a /32 and a /128 for every NIC whose host link is up, plus, toward each remote edge
switch, the networks of its NICs that hold no address attached elsewhere (the per-leaf /24 and
/64 of the derived scheme); packets for a NIC whose link is down fall to that prefix and are
dropped at its switch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network

from controller.intent.model import NextHopGroup, NextHopMember, Route
from topologies.model import LinkId, Switch, Topology


def switch_members(topology: Topology, switch: Switch) -> dict[int, NextHopMember]:
    """One member per used port of ``switch``, by port; the neighbour's MAC is the next hop's."""
    members = {}
    for index, port in enumerate(topology.switch_ports(switch.name)):
        link = topology.link_at(switch.name, port)
        if link is None:  # switch_ports only lists ports with a link
            raise AssertionError(f"{switch.name} port {port} has no link")
        far = link.far_end(switch.name)
        if topology.is_host(far.node):
            dst_mac = topology.host(far.node).nics[far.port].mac
        else:
            dst_mac = topology.switch(far.node).port_mac(far.port)
        members[port] = NextHopMember(
            member_index=index,
            egress_port=port,
            src_mac=switch.port_mac(port),
            dst_mac=dst_mac,
            watch_port=port,
        )
    return members


def edge_switches(topology: Topology) -> tuple[Switch, ...]:
    """Switches that hosts attach to, in file order."""
    attached = {nic.switch for _, nic in topology.nics()}
    return tuple(switch for switch in topology.switches if switch.name in attached)


def group_ids(topology: Topology, switch: Switch) -> tuple[dict[int, int], dict[str, int]]:
    """Stable group ids of ``switch``: by local host port, and by remote edge switch name."""
    host_ports = sorted(nic.switch_port for _, nic in topology.nics() if nic.switch == switch.name)
    local = {port: group_id for group_id, port in enumerate(host_ports, start=1)}
    remotes = [
        edge.name
        for edge in edge_switches(topology)
        if edge.plane == switch.plane and edge.name != switch.name
    ]
    remote = {name: group_id for group_id, name in enumerate(remotes, start=len(local) + 1)}
    return local, remote


def edge_prefixes(topology: Topology) -> dict[str, tuple[IPv4Network | IPv6Network, ...]]:
    """Per edge switch, the networks of its NICs that can be routed to it as a whole.

    A network qualifies when it is shorter than a host route and every NIC address inside it
    is attached to that same switch.
    """
    nics = [nic for _, nic in topology.nics()]
    prefixes: dict[str, tuple[IPv4Network | IPv6Network, ...]] = {}
    for edge in edge_switches(topology):
        networks: set[IPv4Network | IPv6Network] = set()
        for nic in nics:
            if nic.switch == edge.name:
                networks.update((nic.ipv4.network, nic.ipv6.network))
        prefixes[edge.name] = tuple(
            sorted(
                (
                    network
                    for network in networks
                    if network.prefixlen < network.max_prefixlen
                    and all(
                        other.switch == edge.name
                        for other in nics
                        if other.ipv4.ip in network or other.ipv6.ip in network
                    )
                ),
                key=lambda network: (network.version, network),
            )
        )
    return prefixes


def switch_routing(
    topology: Topology,
    switch: Switch,
    members: Mapping[int, NextHopMember],
    ports_toward: Mapping[str, Mapping[str, tuple[int, ...]]],
    prefixes: Mapping[str, tuple[IPv4Network | IPv6Network, ...]],
    live_nics: Mapping[str, Sequence[LiveNic]],
) -> tuple[tuple[NextHopGroup, ...], tuple[Route, ...], tuple[Route, ...]]:
    """Groups, IPv4 routes and IPv6 routes of ``switch``.

    ``ports_toward[edge][switch]`` are the switch's shortest-path ports toward edge switch
    ``edge`` over the links that are up (absent when unreachable); ``live_nics`` are, per
    switch, the NICs plugged into it whose link is up (:func:`nics_with_link_up`).
    """
    local_ids, remote_ids = group_ids(topology, switch)
    groups: list[NextHopGroup] = []
    routes: list[Route] = []
    for nic in live_nics.get(switch.name, ()):
        group_id = local_ids[nic.switch_port]
        groups.append(NextHopGroup(group_id, (members[nic.switch_port],)))
        routes += _host_routes(nic, group_id)
    for edge_name, group_id in remote_ids.items():
        ports = ports_toward[edge_name].get(switch.name, ())
        if not ports:
            continue
        groups.append(NextHopGroup(group_id, tuple(members[port] for port in ports)))
        for nic in live_nics.get(edge_name, ()):
            routes += _host_routes(nic, group_id)
        routes += [Route(prefix, group_id) for prefix in prefixes[edge_name]]
    routes.sort(key=_route_order)
    return (
        tuple(sorted(groups, key=lambda group: group.group_id)),
        tuple(route for route in routes if isinstance(route.prefix, IPv4Network)),
        tuple(route for route in routes if isinstance(route.prefix, IPv6Network)),
    )


def _route_order(route: Route) -> tuple[int, int, int]:
    """Sort key equal to Route's own order within one IP version, but cheaper to compare."""
    prefix = route.prefix
    return int(prefix.network_address), prefix.prefixlen, route.next_id


@dataclass(frozen=True)
class LiveNic:
    """A NIC whose host link is up, with its host prefixes built once per computation."""

    switch_port: int
    ipv4: IPv4Network
    ipv6: IPv6Network


def nics_with_link_up(topology: Topology, down: Collection[LinkId]) -> dict[str, list[LiveNic]]:
    """Per switch, the NICs plugged into it whose host link is not down."""
    nics: dict[str, list[LiveNic]] = {}
    for host, nic in topology.nics():
        if host.link(nic).id not in down:
            live = LiveNic(
                nic.switch_port,
                IPv4Network(f"{nic.ipv4.ip}/32"),
                IPv6Network(f"{nic.ipv6.ip}/128"),
            )
            nics.setdefault(nic.switch, []).append(live)
    return nics


def _host_routes(nic: LiveNic, group_id: int) -> list[Route]:
    return [Route(nic.ipv4, group_id), Route(nic.ipv6, group_id)]
