"""First loading stage: the YAML tree, field by field, into typed but not yet cross-checked items.

Each item (plane, switch, host, link) is read on its own; references between items (a link's
switch, a NIC's plane) are checked by ``topologies.assemble`` once every item has been read, so
that a mistake in one item does not hide the mistakes of the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network
from typing import Generic, TypeVar

from topologies.addressing import (
    MAX_DEVICE_ID,
    default_grpc_port,
    default_thrift_port,
    normalize_mac,
    plane_ipv4_prefix,
    plane_ipv6_prefix,
)
from topologies.defaults import DEFAULT_SETTINGS, MAX_DEVICE_PORT, MAX_PORT
from topologies.errors import ItemRejected, ProblemLog
from topologies.fields import NODE_NAME, SHORT_NAME, TOPOLOGY_NAME, MapReader, describe
from topologies.marked_yaml import YamlList, YamlNode, YamlScalar
from topologies.model import (
    EcnSettings,
    Endpoint,
    Link,
    LinkParams,
    LldpSettings,
    LosslessQueueSettings,
    Plane,
    QueueSettings,
    Role,
    Settings,
    Switch,
)
from wire.dscp import DscpMap

T = TypeVar("T")

_ENDPOINT = re.compile(r"^(?P<node>[A-Za-z][A-Za-z0-9_]{0,9}):(?P<port>[0-9]+)$")
_LINK_PARAM_FIELDS = ("bandwidth_mbps", "queue_depth", "queue_rate_pps")
_MAX_QUEUE_DEPTH = 1_000_000
_MAX_QUEUE_RATE = 100_000_000


@dataclass(frozen=True)
class Located(Generic[T]):
    """An item with the line of each of its fields (key ``""``: the item itself)."""

    item: T
    lines: Mapping[str, int]

    def line(self, key: str = "") -> int:
        """Line of field ``key``, or of the item when the field was not given."""
        return self.lines.get(key, self.lines[""])


@dataclass(frozen=True)
class NicSpec:
    """A NIC as written: addresses, MAC and plane may still be missing (derived later)."""

    name: str
    switch: str
    port: int
    plane: int | None
    ipv4: IPv4Interface | None
    ipv6: IPv6Interface | None
    mac: str | None
    params: LinkParams


@dataclass(frozen=True)
class HostSpec:
    """A host as written."""

    name: str
    nics: tuple[Located[NicSpec], ...]


@dataclass(frozen=True)
class ParsedDocument:
    """Everything read from one file, each item with its lines."""

    name: str
    settings: Located[Settings]
    planes: tuple[Located[Plane], ...]
    switches: tuple[Located[Switch], ...]
    hosts: tuple[Located[HostSpec], ...]
    links: tuple[Located[Link], ...]


def parse_document(root: YamlNode | None, default_name: str, log: ProblemLog) -> ParsedDocument:
    """Read every item of a topology document; problems go to ``log`` (the caller raises)."""
    if root is None:
        log.add(1, "the topology file is empty")
        log.fail()
    try:
        top = MapReader(
            root,
            "topology",
            ("name", "description", "settings", "planes", "switches", "hosts", "links"),
            log,
        )
    except ItemRejected:
        log.fail()
    name = _item(lambda: top.optional_string("name", TOPOLOGY_NAME)) or default_name
    _item(lambda: top.optional_string("description"))
    settings = _item(lambda: _parse_settings(top))
    if settings is None:
        # Defaults stand in so that the other items are still checked; the log already fails.
        settings = Located(DEFAULT_SETTINGS, {"": top.line})
    link_defaults = settings.item.link_defaults
    planes_nodes = _item(lambda: top.list_of("planes", required=False)) or ()
    switch_nodes = _item(lambda: top.list_of("switches", required=True)) or ()
    host_nodes = _item(lambda: top.list_of("hosts", required=False)) or ()
    link_nodes = _item(lambda: top.list_of("links", required=False)) or ()
    if _is_empty_list(top.optional("switches")):
        log.add(top.line_of("switches"), "topology: 'switches' must list at least one switch")
    if _is_empty_list(top.optional("planes")):
        log.add(top.line_of("planes"), "topology: 'planes' must list at least one plane")
    planes = tuple(_items(planes_nodes, lambda node, i: _parse_plane(node, i, log)))
    if not top.has("planes"):
        planes = (Located(_default_plane(0), {"": top.line}),)
    return ParsedDocument(
        name=name,
        settings=settings,
        planes=planes,
        switches=tuple(_items(switch_nodes, lambda node, i: _parse_switch(node, i, log))),
        hosts=tuple(_items(host_nodes, lambda node, i: _parse_host(node, i, link_defaults, log))),
        links=tuple(_items(link_nodes, lambda node, i: _parse_link(node, i, link_defaults, log))),
    )


def _is_empty_list(node: YamlNode | None) -> bool:
    return isinstance(node, YamlList) and not node.items


def _item(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except ItemRejected:
        return None


def _items(nodes: tuple[YamlNode, ...], read: Callable[[YamlNode, int], T]) -> list[T]:
    """Read every item of a list; a rejected item is left out (its problem is already logged)."""
    parsed = []
    for index, node in enumerate(nodes):
        try:
            parsed.append(read(node, index))
        except ItemRejected:
            continue
    return parsed


def _parse_settings(top: MapReader) -> Located[Settings]:
    default = DEFAULT_SETTINGS
    reader = top.optional_map(
        "settings",
        (
            "cpu_port",
            "trim_threshold",
            "trimming",
            "ecn",
            "dscp",
            "lldp",
            "link_defaults",
            "high_priority_queue",
            "lossless_queue",
        ),
    )
    if reader is None:
        return Located(default, {"": top.line})
    cpu_port = _or(reader.optional_integer("cpu_port", 1, MAX_PORT), default.cpu_port)
    trim = _or(
        reader.optional_integer("trim_threshold", 1, _MAX_QUEUE_DEPTH), default.trim_threshold
    )
    trimming = _or(reader.optional_boolean("trimming"), default.trimming)
    ecn = default.ecn
    ecn_reader = reader.optional_map("ecn", ("min_threshold", "max_threshold"))
    if ecn_reader is not None:
        ecn = EcnSettings(
            min_threshold=_or(
                ecn_reader.optional_integer("min_threshold", 0, _MAX_QUEUE_DEPTH),
                default.ecn.min_threshold,
            ),
            max_threshold=_or(
                ecn_reader.optional_integer("max_threshold", 1, _MAX_QUEUE_DEPTH),
                default.ecn.max_threshold,
            ),
        )
        if ecn.min_threshold > ecn.max_threshold:
            raise ecn_reader.fail(
                "min_threshold",
                f"min_threshold {ecn.min_threshold} is above max_threshold {ecn.max_threshold}",
            )
    return Located(
        Settings(
            cpu_port=cpu_port,
            ecn=ecn,
            trim_threshold=trim,
            trimming=trimming,
            dscp=_parse_dscp(reader),
            lldp=_parse_lldp(reader),
            link_defaults=_parse_link_params(
                reader.optional_map("link_defaults", _LINK_PARAM_FIELDS), default.link_defaults
            ),
            high_priority_queue=_parse_queue(reader),
            lossless_queue=_parse_lossless_queue(reader),
        ),
        reader.lines(),
    )


def _parse_dscp(settings: MapReader) -> DscpMap:
    names = DscpMap.names()
    reader = settings.optional_map("dscp", names)
    if reader is None:
        return DscpMap()
    default = DscpMap()
    values = {
        name: _or(reader.optional_integer(name, 0, 63), getattr(default, name)) for name in names
    }
    seen: dict[int, str] = {}
    for name, value in values.items():
        if value in seen:
            raise reader.fail(
                name, f"DSCP value {value} is used by both {seen[value]!r} and {name!r}"
            )
        seen[value] = name
    return DscpMap(**values)


def _parse_lldp(settings: MapReader) -> LldpSettings:
    default = DEFAULT_SETTINGS.lldp
    reader = settings.optional_map("lldp", ("interval_ms", "miss_limit"))
    if reader is None:
        return default
    return LldpSettings(
        interval_ms=_or(reader.optional_integer("interval_ms", 1, 60_000), default.interval_ms),
        miss_limit=_or(reader.optional_integer("miss_limit", 1, 1000), default.miss_limit),
    )


def _parse_queue(settings: MapReader) -> QueueSettings:
    default = DEFAULT_SETTINGS.high_priority_queue
    reader = settings.optional_map("high_priority_queue", ("depth", "rate_pps"))
    if reader is None:
        return default
    return QueueSettings(
        depth=_or(reader.optional_integer("depth", 1, _MAX_QUEUE_DEPTH), default.depth),
        rate_pps=_or(reader.optional_integer("rate_pps", 0, _MAX_QUEUE_RATE), default.rate_pps),
    )


def _parse_lossless_queue(settings: MapReader) -> LosslessQueueSettings:
    default = DEFAULT_SETTINGS.lossless_queue
    reader = settings.optional_map("lossless_queue", ("depth",))
    if reader is None:
        return default
    return LosslessQueueSettings(
        depth=_or(reader.optional_integer("depth", 1, _MAX_QUEUE_DEPTH), default.depth)
    )


def _parse_link_params(reader: MapReader | None, default: LinkParams) -> LinkParams:
    if reader is None:
        return default
    return LinkParams(
        bandwidth_mbps=_or(
            reader.optional_positive_number("bandwidth_mbps"), default.bandwidth_mbps
        ),
        queue_depth=_or(
            reader.optional_integer("queue_depth", 1, _MAX_QUEUE_DEPTH), default.queue_depth
        ),
        queue_rate_pps=_or(
            reader.optional_integer("queue_rate_pps", 0, _MAX_QUEUE_RATE), default.queue_rate_pps
        ),
    )


def _default_plane(plane_id: int) -> Plane:
    return Plane(
        plane_id, f"plane{plane_id}", plane_ipv4_prefix(plane_id), plane_ipv6_prefix(plane_id)
    )


def _parse_plane(node: YamlNode, index: int, log: ProblemLog) -> Located[Plane]:
    reader = MapReader(
        node, f"plane #{index + 1}", ("id", "name", "ipv4_prefix", "ipv6_prefix"), log
    )
    plane_id = reader.integer("id", 0, 255)
    reader.what = f"plane {plane_id}"
    default = _default_plane(plane_id)
    return Located(
        Plane(
            id=plane_id,
            name=_or(reader.optional_string("name", SHORT_NAME), default.name),
            ipv4_prefix=_or(
                reader.converted("ipv4_prefix", _ipv4_network, required=False), default.ipv4_prefix
            ),
            ipv6_prefix=_or(
                reader.converted("ipv6_prefix", _ipv6_network, required=False), default.ipv6_prefix
            ),
        ),
        reader.lines(),
    )


def _parse_switch(node: YamlNode, index: int, log: ProblemLog) -> Located[Switch]:
    reader = MapReader(
        node,
        f"switch #{index + 1}",
        (
            "name",
            "role",
            "tier",
            "device_id",
            "grpc_port",
            "thrift_port",
            "plane",
            "device_ports",
            "cpu_device_port",
        ),
        log,
    )
    name = reader.string("name", NODE_NAME)
    reader.what = f"switch {name!r}"
    role_text = reader.string("role")
    try:
        role = Role(role_text)
    except ValueError:
        raise reader.fail(
            "role", f"unknown role {role_text!r} (known: {', '.join(role.value for role in Role)})"
        ) from None
    device_id = reader.integer("device_id", 1, MAX_DEVICE_ID)
    device_ports, port_lines = _parse_device_ports(reader, log)
    return Located(
        Switch(
            name=name,
            role=role,
            tier=_or(reader.optional_integer("tier", 0, 15), role.default_tier),
            device_id=device_id,
            grpc_port=_or(
                reader.optional_integer("grpc_port", 1, 65535), default_grpc_port(device_id)
            ),
            thrift_port=_or(
                reader.optional_integer("thrift_port", 1, 65535), default_thrift_port(device_id)
            ),
            plane=_or(reader.optional_integer("plane", 0, 255), 0),
            device_ports=device_ports,
            cpu_device_port=reader.optional_integer("cpu_device_port", 0, MAX_DEVICE_PORT),
        ),
        {**reader.lines(), **port_lines},
    )


def device_port_key(port: int) -> str:
    """The key under which a switch's ``Located.lines`` holds the line mapping ``port``."""
    return f"device_ports[{port}]"


def _parse_device_ports(
    reader: MapReader, log: ProblemLog
) -> tuple[tuple[tuple[int, int], ...], dict[str, int]]:
    """A switch's port map: ``[{port: P, device_port: D}, ...]``, each port and device port
    once; with the line of each entry (key :func:`device_port_key`)."""
    nodes = reader.list_of("device_ports", required=False)
    pairs: dict[int, int] = {}
    lines: dict[str, int] = {}
    device_lines: dict[int, int] = {}
    for index, node in enumerate(nodes):
        entry = MapReader(
            node, f"{reader.what} device_ports #{index + 1}", ("port", "device_port"), log
        )
        port = entry.integer("port", 0, MAX_PORT)
        device = entry.integer("device_port", 0, MAX_DEVICE_PORT)
        if port in pairs:
            first = lines[device_port_key(port)]
            raise entry.fail("port", f"port {port} is mapped twice (first at line {first})")
        if device in device_lines:
            first = device_lines[device]
            raise entry.fail(
                "device_port", f"device port {device} is given to two ports (first at line {first})"
            )
        pairs[port] = device
        lines[device_port_key(port)] = entry.line
        device_lines[device] = entry.line
    return tuple(sorted(pairs.items())), lines


def _parse_host(
    node: YamlNode, index: int, link_defaults: LinkParams, log: ProblemLog
) -> Located[HostSpec]:
    reader = MapReader(node, f"host #{index + 1}", ("name", "nics"), log)
    name = reader.string("name", NODE_NAME)
    reader.what = f"host {name!r}"
    nic_nodes = reader.list_of("nics", required=True)
    if not nic_nodes:
        raise reader.fail("nics", "a host needs at least one NIC")
    nics = []
    for nic_index, nic_node in enumerate(nic_nodes):
        nics.append(_parse_nic(nic_node, name, nic_index, link_defaults, log))
    return Located(HostSpec(name, tuple(nics)), reader.lines())


def _parse_nic(
    node: YamlNode, host: str, index: int, link_defaults: LinkParams, log: ProblemLog
) -> Located[NicSpec]:
    reader = MapReader(
        node,
        f"host {host!r} NIC #{index + 1}",
        ("name", "switch", "port", "plane", "ipv4", "ipv6", "mac", *_LINK_PARAM_FIELDS),
        log,
    )
    name = _or(reader.optional_string("name", SHORT_NAME), f"eth{index}")
    reader.what = f"host {host!r} NIC {name!r}"
    return Located(
        NicSpec(
            name=name,
            switch=reader.string("switch", NODE_NAME),
            port=reader.integer("port", 0, MAX_PORT),
            plane=reader.optional_integer("plane", 0, 255),
            ipv4=reader.converted("ipv4", _ipv4_interface, required=False),
            ipv6=reader.converted("ipv6", _ipv6_interface, required=False),
            mac=reader.converted("mac", normalize_mac, required=False),
            params=_parse_link_params(reader, link_defaults),
        ),
        reader.lines(),
    )


def _parse_link(
    node: YamlNode, index: int, link_defaults: LinkParams, log: ProblemLog
) -> Located[Link]:
    reader = MapReader(node, f"link #{index + 1}", ("a", "b", *_LINK_PARAM_FIELDS), log)
    a = _endpoint(reader, "a")
    b = _endpoint(reader, "b")
    reader.what = f"link {a}-{b}"
    return Located(Link(a, b, _parse_link_params(reader, link_defaults)), reader.lines())


def _endpoint(reader: MapReader, key: str) -> Endpoint:
    node = reader.required(key)
    text = node.value if isinstance(node, YamlScalar) else None
    match = _ENDPOINT.match(text) if isinstance(text, str) else None
    if match is None:
        raise reader.fail(key, f"end {key!r} must be NODE:PORT (e.g. l1:3), not {describe(node)}")
    port = int(match["port"])
    if port > MAX_PORT:
        raise reader.fail(key, f"end {key!r} port {port} is outside 0..{MAX_PORT}")
    return Endpoint(match["node"], port)


def _ipv4_interface(text: str) -> IPv4Interface:
    if "/" not in text:
        raise ValueError("give the prefix length, e.g. 10.0.1.1/24")
    interface = IPv4Interface(text)
    _check_host_part(interface)
    return interface


def _ipv6_interface(text: str) -> IPv6Interface:
    if "/" not in text:
        raise ValueError("give the prefix length, e.g. fd00:0:1::1/64")
    interface = IPv6Interface(text)
    _check_host_part(interface)
    return interface


def _check_host_part(interface: IPv4Interface | IPv6Interface) -> None:
    network = interface.network
    if network.num_addresses > 2 and interface.ip == network.network_address:
        raise ValueError("that is the network address, not a host address")
    if (
        isinstance(interface, IPv4Interface)
        and network.num_addresses > 2
        and interface.ip == network.broadcast_address
    ):
        raise ValueError("that is the broadcast address, not a host address")
    if interface.ip.is_multicast or interface.ip.is_unspecified:
        raise ValueError("not a unicast host address")


def _ipv4_network(text: str) -> IPv4Network:
    return IPv4Network(text, strict=True)


def _ipv6_network(text: str) -> IPv6Network:
    return IPv6Network(text, strict=True)


def _or(value: T | None, default: T) -> T:
    return default if value is None else value
