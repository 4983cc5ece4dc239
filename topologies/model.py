"""The topology as frozen data: what Mininet builds, the controller programs and tests check.

Objects are immutable and hashable so that they can be shared between threads, used as dict keys
and compared whole. Every value here is resolved: defaults applied, addresses and MACs derived;
``topologies.loader`` is the only place that builds a :class:`Topology` from a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network

from topologies.addressing import switch_port_mac
from wire.dscp import DscpMap


class Role(StrEnum):
    """What a switch is in its fabric; the role gives the default tier (0 = where hosts attach)."""

    LEAF = "leaf"
    SPINE = "spine"
    AGG = "agg"
    CORE = "core"

    @property
    def default_tier(self) -> int:
        """Tier a switch of this role sits on unless the file says otherwise."""
        return {Role.LEAF: 0, Role.SPINE: 1, Role.AGG: 1, Role.CORE: 2}[self]


@dataclass(frozen=True)
class LinkParams:
    """Shape of one link: its bandwidth and the BMv2 egress queue at each of its switch ends.

    The queue (``set_queue_depth`` in packets, ``set_queue_rate`` in packets/s, 0 = unlimited) is
    the testbed's bottleneck for ECN and trimming; ``bandwidth_mbps`` is only the veth shaping.
    """

    bandwidth_mbps: float
    queue_depth: int
    queue_rate_pps: int


@dataclass(frozen=True)
class QueueSettings:
    """Depth (packets) and rate (packets/s, 0 = unlimited) of one BMv2 priority queue."""

    depth: int
    rate_pps: int


@dataclass(frozen=True)
class LosslessQueueSettings:
    """The lossless RoCE class's queue on every switch port (BMv2's priority queue 1): RoCE data
    waits here instead of being dropped, "no congestion drops; pause frames (PFC) not modelled".

    Only its depth (packets) is set here: its rate is the link's ``queue_rate_pps``, so RoCE
    meets the same bottleneck as MRC. Deep enough that congestion never fills it: a queue that
    did would drop at its tail, as no pause frame slows its senders.
    """

    depth: int


@dataclass(frozen=True)
class EcnSettings:
    """RED-like ECN marking between two queue depths, in packets."""

    min_threshold: int
    max_threshold: int


@dataclass(frozen=True)
class LldpSettings:
    """Link liveness probing: one probe per port every ``interval_ms``; ``miss_limit`` misses in
    a row declare the link down."""

    interval_ms: int
    miss_limit: int


@dataclass(frozen=True)
class Settings:
    """Fabric-wide settings: CPU port, ECN and trimming thresholds, DSCP values, LLDP, queues."""

    cpu_port: int
    ecn: EcnSettings
    trim_threshold: int
    dscp: DscpMap
    lldp: LldpSettings
    link_defaults: LinkParams
    high_priority_queue: QueueSettings
    lossless_queue: LosslessQueueSettings
    #: Whether switches trim at all (a switch without the feature: full queues drop at the tail).
    trimming: bool = True


@dataclass(frozen=True)
class Plane:
    """One plane: a separate fabric; every NIC address of the plane lies inside its prefixes."""

    id: int
    name: str
    ipv4_prefix: IPv4Network
    ipv6_prefix: IPv6Network


@dataclass(frozen=True)
class Switch:
    """A switch: one ``simple_switch_grpc`` with its P4Runtime and Thrift service ports."""

    name: str
    role: Role
    tier: int
    device_id: int
    grpc_port: int
    thrift_port: int
    plane: int
    #: Hardware switches (the ``tofino`` target): the device port of each used switch port, as
    #: the switch's P4Runtime server numbers it, as (port, device port) pairs sorted by port.
    #: Empty: the device numbers its ports as the topology does (BMv2, kernel switches).
    device_ports: tuple[tuple[int, int], ...] = ()
    #: The device's CPU port (where packet-outs come from and packet-ins go); None: not given.
    cpu_device_port: int | None = None

    def port_mac(self, port: int) -> str:
        """MAC of one of this switch's ports (derived from device id and port)."""
        return switch_port_mac(self.device_id, port)

    def device_port(self, port: int) -> int:
        """The device's number for topology ``port`` (the same number without a port map)."""
        return dict(self.device_ports).get(port, port)


@dataclass(frozen=True, order=True)
class Endpoint:
    """One end of a link: a node and its port. A host's port is its NIC's index in ``nics``."""

    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"


@dataclass(frozen=True, order=True)
class LinkId:
    """Names a link independently of its direction: the two endpoints in sorted order."""

    a: Endpoint
    b: Endpoint

    def __post_init__(self) -> None:
        if self.b < self.a:
            raise ValueError(f"LinkId ends must be sorted; use LinkId.between({self.a}, {self.b})")

    @classmethod
    def between(cls, one: Endpoint, other: Endpoint) -> LinkId:
        """The id of the link joining ``one`` and ``other``, whichever way round they are given."""
        low, high = sorted((one, other))
        return cls(low, high)

    def __str__(self) -> str:
        return f"{self.a}<->{self.b}"


@dataclass(frozen=True)
class Link:
    """A cable between two endpoints (switch-switch, or host NIC to switch)."""

    a: Endpoint
    b: Endpoint
    params: LinkParams

    @property
    def id(self) -> LinkId:
        """Direction-free identity of this link, as used in link-state sets."""
        return LinkId.between(self.a, self.b)

    def end_at(self, node: str) -> Endpoint:
        """This link's endpoint on ``node``."""
        for end in (self.a, self.b):
            if end.node == node:
                return end
        raise KeyError(f"link {self.id} does not touch {node!r}")

    def far_end(self, node: str) -> Endpoint:
        """The endpoint opposite the one on ``node``."""
        return self.b if self.end_at(node) == self.a else self.a


@dataclass(frozen=True)
class Nic:
    """One host NIC: its addresses, its plane and the switch port it is plugged into."""

    name: str
    index: int
    switch: str
    switch_port: int
    plane: int
    ipv4: IPv4Interface
    ipv6: IPv6Interface
    mac: str
    params: LinkParams

    @property
    def attachment(self) -> Endpoint:
        """The switch port this NIC is plugged into."""
        return Endpoint(self.switch, self.switch_port)


@dataclass(frozen=True)
class Host:
    """A host, with one NIC per plane it is on (possibly several on one plane)."""

    name: str
    nics: tuple[Nic, ...]

    def link(self, nic: Nic) -> Link:
        """The link between ``nic`` and its switch port (host end first)."""
        return Link(Endpoint(self.name, nic.index), nic.attachment, nic.params)


@dataclass(frozen=True)
class Topology:
    """A whole, validated testbed network."""

    name: str
    settings: Settings
    planes: tuple[Plane, ...]
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    #: Switch-to-switch links, as the file lists them; host links come from :attr:`host_links`.
    links: tuple[Link, ...]
    #: The file the topology came from; not part of its identity.
    source: str = field(default="<memory>", compare=False)

    def switch(self, name: str) -> Switch:
        """The switch called ``name`` (KeyError if none)."""
        return self._switches_by_name[name]

    def host(self, name: str) -> Host:
        """The host called ``name`` (KeyError if none)."""
        return self._hosts_by_name[name]

    def plane(self, plane_id: int) -> Plane:
        """The plane with id ``plane_id`` (KeyError if none)."""
        return self._planes_by_id[plane_id]

    @cached_property
    def host_links(self) -> tuple[Link, ...]:
        """One link per host NIC, host end first."""
        return tuple(host.link(nic) for host in self.hosts for nic in host.nics)

    @cached_property
    def all_links(self) -> tuple[Link, ...]:
        """Switch-to-switch links followed by host links."""
        return self.links + self.host_links

    def nics(self) -> Iterator[tuple[Host, Nic]]:
        """Every NIC with its host, in file order."""
        for host in self.hosts:
            for nic in host.nics:
                yield host, nic

    def link_at(self, node: str, port: int) -> Link | None:
        """The link plugged into ``port`` of ``node``, or None if the port is unused."""
        return self._links_by_endpoint.get(Endpoint(node, port))

    def switch_ports(self, name: str) -> tuple[int, ...]:
        """The ports of switch ``name`` that a link or NIC uses, sorted."""
        self.switch(name)
        return self._ports_by_node.get(name, ())

    def is_host(self, name: str) -> bool:
        """True if ``name`` names a host (not a switch)."""
        return name in self._hosts_by_name

    @cached_property
    def _switches_by_name(self) -> dict[str, Switch]:
        return {switch.name: switch for switch in self.switches}

    @cached_property
    def _hosts_by_name(self) -> dict[str, Host]:
        return {host.name: host for host in self.hosts}

    @cached_property
    def _planes_by_id(self) -> dict[int, Plane]:
        return {plane.id: plane for plane in self.planes}

    @cached_property
    def _ports_by_node(self) -> dict[str, tuple[int, ...]]:
        ports: dict[str, list[int]] = {}
        for end in self._links_by_endpoint:
            ports.setdefault(end.node, []).append(end.port)
        return {node: tuple(sorted(numbers)) for node, numbers in ports.items()}

    @cached_property
    def _links_by_endpoint(self) -> dict[Endpoint, Link]:
        return {end: link for link in self.all_links for end in (link.a, link.b)}
