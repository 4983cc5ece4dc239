"""What a switch should hold, as frozen data independent of P4 names.

Every entity has a ``key``: what identifies it in its table (a route's prefix, a group's id, a
port's number). Two entities with the same key and different values are a *modify*; this is
what ``controller.intent.diff`` compares, and what the southbound rebuilds from read-back state
to diff against the switch with the same types.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from wire.dscp import TrafficClass


@dataclass(frozen=True, order=True)
class NextHopMember:
    """One way out of a switch: the port, and the MACs a routed packet leaves it with.

    ``member_index`` is stable for the switch's lifetime (the port's position among the switch's
    used ports), so it can index per-member packet counters; ``watch_port`` is the egress port,
    so that BMv2 stops hashing onto the member as soon as the port's carrier goes.
    """

    member_index: int
    egress_port: int
    src_mac: str
    dst_mac: str
    watch_port: int

    @property
    def key(self) -> int:
        """Identity within the switch's member table."""
        return self.member_index


@dataclass(frozen=True)
class NextHopGroup:
    """The usable next hops toward one destination (ECMP over them, by entropy value).

    A group's id depends on its destination only (a local host port, or a remote edge switch),
    never on link state, so a failure changes the members of existing groups and leaves routes
    alone: failover is a few group modifies.
    """

    group_id: int
    members: tuple[NextHopMember, ...]

    @property
    def key(self) -> int:
        """Identity within the switch's group table."""
        return self.group_id

    @property
    def ports(self) -> tuple[int, ...]:
        """Egress ports of the members, in member order."""
        return tuple(member.egress_port for member in self.members)


@dataclass(frozen=True, order=True)
class Route:
    """A longest-prefix-match route to a next-hop group."""

    prefix: IPv4Network | IPv6Network
    next_id: int

    @property
    def key(self) -> IPv4Network | IPv6Network:
        """Identity within the route table: the prefix."""
        return self.prefix


@dataclass(frozen=True)
class PortIntent:
    """Per-port queueing, ECN and trimming configuration.

    ECN is off toward hosts: MRC reads a mark as "this path is loaded", which the last hop
    (incast at the receiver) is not. ``host_facing`` lets the data plane tell a last-hop trim
    (TRIMMED_LASTHOP) from a fabric one.
    """

    port: int
    host_facing: bool
    ecn_enabled: bool
    ecn_min_threshold: int
    ecn_max_threshold: int
    #: Queue depth at which trimmable packets are trimmed; None: this port never trims.
    trim_threshold: int | None
    queue_depth: int
    queue_rate_pps: int
    high_priority_queue_depth: int
    high_priority_queue_rate_pps: int
    #: The lossless RoCE class's queue (no congestion drops; pause frames not modelled); its
    #: rate is ``queue_rate_pps``, the link's.
    lossless_queue_depth: int

    @property
    def key(self) -> int:
        """Identity within the port table."""
        return self.port


@dataclass(frozen=True, order=True)
class DscpRule:
    """DSCP classification: packets with ``dscp`` belong to ``traffic_class``.

    The class is named by its ``DscpClass`` (MRC) or ``RoceDscp`` (standard RoCEv2) member,
    whose value is only its default DSCP.
    """

    dscp: int
    traffic_class: TrafficClass

    @property
    def key(self) -> int:
        """Identity within the classification table: the DSCP value."""
        return self.dscp


@dataclass(frozen=True, order=True)
class EvFieldIntent:
    """Where this switch reads its structured EV field: ``width`` bits from EV bit ``shift``
    (``topologies.paths.EvLayout``)."""

    shift: int
    width: int

    @property
    def mask(self) -> int:
        """The field's value mask, applied after shifting the EV right by ``shift``."""
        return (1 << self.width) - 1


@dataclass(frozen=True, order=True)
class EvUplink:
    """Structured EV: toward next-hop group ``next_id``, EV field value ``field_value`` leaves
    by one port exactly, instead of a hash bucket of the group."""

    next_id: int
    field_value: int
    egress_port: int
    src_mac: str
    dst_mac: str

    @property
    def key(self) -> tuple[int, int]:
        """Identity within the uplink table: the group and the field value."""
        return (self.next_id, self.field_value)


@dataclass(frozen=True, order=True)
class LocalUsid:
    """SRv6: a uSID of this switch in a block; a carrier whose active uSID it is gets shifted
    here (and decapsulated when it was the last)."""

    block: IPv6Network
    usid: int

    @property
    def key(self) -> tuple[IPv6Network, int]:
        """Identity within the local uSID table: block and uSID."""
        return (self.block, self.usid)


@dataclass(frozen=True, order=True)
class UsidNextHop:
    """SRv6: a carrier whose next uSID is ``usid`` (a neighbour's) leaves by this port."""

    block: IPv6Network
    usid: int
    egress_port: int
    src_mac: str
    dst_mac: str

    @property
    def key(self) -> tuple[IPv6Network, int]:
        """Identity within the uSID forwarding table: block and uSID."""
        return (self.block, self.usid)


@dataclass(frozen=True)
class LldpIntent:
    """Link probing: a probe out of every port each ``interval_ms``; ``miss_limit`` missed
    probes in a row mean the link is down."""

    interval_ms: int
    miss_limit: int


@dataclass(frozen=True)
class SwitchIntent:
    """Everything one switch should hold. Tables are tuples sorted by key."""

    switch: str
    cpu_port: int
    lldp: LldpIntent
    dscp_rules: tuple[DscpRule, ...]
    ports: tuple[PortIntent, ...]
    #: Every member the switch could use (one per used port), whatever the link state.
    members: tuple[NextHopMember, ...]
    groups: tuple[NextHopGroup, ...]
    routes_v4: tuple[Route, ...]
    routes_v6: tuple[Route, ...]
    #: Structured EV (``controller.intent.path_tables``): where this switch's field sits (None:
    #: the switch hashes only) and its exact uplinks. Static: computed from the whole topology.
    ev_field: EvFieldIntent | None = None
    ev_uplinks: tuple[EvUplink, ...] = ()
    #: SRv6 uSID: this switch's own uSIDs and its static per-neighbour forwarding.
    local_usids: tuple[LocalUsid, ...] = ()
    usid_next_hops: tuple[UsidNextHop, ...] = ()

    def group(self, group_id: int) -> NextHopGroup:
        """The group with ``group_id`` (KeyError if none)."""
        return self._groups_by_id[group_id]

    def port(self, port: int) -> PortIntent:
        """The configuration of ``port`` (KeyError if the port is unused)."""
        return self._ports_by_number[port]

    def lookup(self, address: IPv4Address | IPv6Address) -> NextHopGroup | None:
        """Longest-prefix match of ``address``: the group a packet to it is hashed over."""
        routes = self.routes_v4 if isinstance(address, IPv4Address) else self.routes_v6
        best: Route | None = None
        for route in routes:
            if address in route.prefix and (
                best is None or route.prefix.prefixlen > best.prefix.prefixlen
            ):
                best = route
        return None if best is None else self.group(best.next_id)

    @cached_property
    def _groups_by_id(self) -> dict[int, NextHopGroup]:
        return {group.group_id: group for group in self.groups}

    @cached_property
    def _ports_by_number(self) -> dict[int, PortIntent]:
        return {port.port: port for port in self.ports}


@dataclass(frozen=True)
class FabricIntent:
    """The intent of every switch of a topology, in topology order."""

    switches: tuple[SwitchIntent, ...]

    def switch(self, name: str) -> SwitchIntent:
        """The intent of switch ``name`` (KeyError if none)."""
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, SwitchIntent]:
        return {intent.switch: intent for intent in self.switches}
