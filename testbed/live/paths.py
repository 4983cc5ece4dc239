"""The path an EV hashes to: switch after switch, from the sender's NIC to the receiver's.

A switch picks among equal next hops by hashing packet fields, so an EV's path is that choice
made at every hop for the connection's addresses, the EV and the destination port. Each target
tells it its own way, asked hop by hop (:class:`NextHops`):

* ``linux`` (:class:`KernelNextHops`): the kernel answers ``ip route get <dst> from <src> iif
  <port> ipproto udp sport <ev> dport 4791`` in the switch's namespace with the route it gives
  such a forwarded packet: the same multipath hash (policy, per-namespace seed) and weights.
  Checked against forwarded packets when this was written; the hash itself (SipHash over the
  kernel's flow keys with a random or configured seed) is not recomputed here.
* ``bmv2`` (:class:`Bmv2NextHops`): no such query exists. The selector of
  ``MrcIngress.next.hashed`` (``p4src/include/control/next.p4``) hashes ``hash_src``,
  ``hash_dst`` (128 bits each, an IPv4 address zero-extended) and ``ev`` (UDP source port in
  the high 16 bits, the IPv6 flow label's low 16 bits in the low ones) with CRC-32, the
  reflected one zlib computes; PI's group selection takes the hash modulo the number of the
  group's *active* members and picks that one in member-handle order. Everything else comes
  from the switch's own state over Thrift (routes, next-hop id to group or member, members
  with their action data, groups by handle, port status), read at most once per
  ``SNAPSHOT_TTL_S``, so the answer is what the switch holds, not what the controller meant.
  Active: PI's watch-port enforcer deactivates a member whose watched port is down; every
  member but the group's anchor (its lowest member index, ``controller.southbound.mapping``)
  watches its own egress port.
  In structured EV mode (docs/routing.md) a switch whose keyless ``ev_field`` table holds a
  default ``set_ev_field`` reads its EV field first, and a hit in ``uplinks`` for the route's
  next-hop id and that field value decides the port before any hashing.
* SRv6 mode, either target (:class:`CarrierNextHops`): the packet carries its path, the carrier
  the sending agent derives from the EV (``agent.io.srv6_carriers``), and the switches' uSID
  tables are static, from the same topology; so the path is the carrier's, computed here.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any, Protocol

from agent.io.srv6_carriers import Srv6Carriers
from controller.southbound.linux.names import interface_port, namespace_of, port_interface
from topologies.model import Topology
from wire.constants import ROCEV2_UDP_PORT
from wire.entropy import ev_flow_label, ev_from_headers, ev_source_port

#: Hops walked before a path is declared a loop.
MAX_HOPS = 16
#: Seconds a BMv2 switch's tables, read over Thrift, are reused.
SNAPSHOT_TTL_S = 2.0
IP_TIMEOUT_S = 5.0


class PathUnknown(Exception):
    """The target cannot say where a packet goes (no route, no answer, unreadable state)."""


@dataclass(frozen=True)
class Flow:
    """The fields a switch hashes: addresses, UDP ports, the IPv6 flow label."""

    source: IPv4Address | IPv6Address
    destination: IPv4Address | IPv6Address
    source_port: int
    flow_label: int = 0
    destination_port: int = ROCEV2_UDP_PORT

    @classmethod
    def of_ev(cls, source: str, destination: str, ev: int) -> Flow:
        """The packets of a connection from ``source`` to ``destination`` sent with ``ev``:
        its UDP source port and (IPv6 only) flow label, as ``wire.entropy`` maps them."""
        src, dst = ip_address(source), ip_address(destination)
        if src.version != dst.version:
            raise ValueError(f"{source} and {destination} are not of one address family")
        return cls(src, dst, ev_source_port(ev), ev_flow_label(ev) if src.version == 6 else 0)

    @property
    def ev(self) -> int:
        """The EV these packets travel on (what the switches hash): the flow label counts
        over IPv6 only."""
        label = self.flow_label if self.destination.version == 6 else 0
        return ev_from_headers(self.source_port, label)


class NextHops(Protocol):
    """One target's answer to "which port does ``switch`` send this flow out of"."""

    def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
        """The port; PathUnknown when the switch would drop it or cannot be asked."""
        ...


@dataclass(frozen=True)
class EvPath:
    """Nodes from sender to receiver and the links between them (ids as the status names
    them, each with the end the packet leaves from); ``error`` says where and why it stops
    short."""

    nodes: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.error is None,
            "nodes": list(self.nodes),
            "links": [{"id": link, "from": end} for link, end in self.links],
            "error": self.error,
        }


def walk(topology: Topology, flow: Flow, next_hops: NextHops) -> EvPath:
    """Follow ``flow`` from the NIC holding its source address to the NIC holding its
    destination, asking ``next_hops`` at every switch."""
    located = _nic_with(topology, flow.source)
    if located is None:
        return EvPath((), (), f"no host NIC has the address {flow.source}")
    host, nic = located
    nodes = [host.name]
    links: list[tuple[str, str]] = []
    link = host.link(nic)
    here, in_port = nic.switch, nic.switch_port
    links.append((str(link.id), f"{host.name}:{nic.index}"))
    for _ in range(MAX_HOPS):
        nodes.append(here)
        try:
            port = next_hops.egress_port(here, in_port, flow)
        except PathUnknown as error:
            return EvPath(tuple(nodes), tuple(links), f"{here}: {error}")
        out = topology.link_at(here, port)
        if out is None:
            return EvPath(tuple(nodes), tuple(links), f"{here} sends it out of unused port {port}")
        links.append((str(out.id), f"{here}:{port}"))
        far = out.far_end(here)
        if topology.is_host(far.node):
            nodes.append(far.node)
            reached = topology.host(far.node).nics[far.port]
            if flow.destination not in (reached.ipv4.ip, reached.ipv6.ip):
                return EvPath(tuple(nodes), tuple(links), f"delivered to {far} instead")
            return EvPath(tuple(nodes), tuple(links))
        here, in_port = far.node, far.port
    return EvPath(tuple(nodes), tuple(links), f"no destination after {MAX_HOPS} hops (a loop?)")


def _nic_with(topology: Topology, address: IPv4Address | IPv6Address) -> Any:
    for host, nic in topology.nics():
        if address in (nic.ipv4.ip, nic.ipv6.ip):
            return host, nic
    return None


def host_of(topology: Topology, address: str) -> str | None:
    """The host holding ``address`` on one of its NICs, or None."""
    try:
        located = _nic_with(topology, ip_address(address))
    except ValueError:
        return None
    return None if located is None else located[0].name


# -- linux ---------------------------------------------------------------------------------------

IpRunner = Callable[[list[str]], str]


def run_ip(argv: list[str]) -> str:
    """Run ``ip``; its JSON output, or PathUnknown with its error."""
    try:
        proc = subprocess.run(
            ["ip", *argv], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise PathUnknown(f"ip route get failed: {error}") from error
    if proc.returncode != 0:
        raise PathUnknown(proc.stderr.strip() or f"ip exited with {proc.returncode}")
    return proc.stdout


class CarrierNextHops:
    """SRv6 mode: the port each switch of an EV's carrier sends it out of (module docs)."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._carriers = Srv6Carriers(topology)

    def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
        ev = flow.ev
        path = self._carriers.path(flow.source.packed, flow.destination.packed, ev, False)
        if path is None:
            raise PathUnknown("no carrier for this flow (not two hosts of one plane)")
        if switch not in path.switches:
            raise PathUnknown(f"not on the carrier's path {' -> '.join(path.switches)}")
        hop = path.switches.index(switch)
        if hop < len(path.ports):
            return path.ports[hop]
        located = _nic_with(self._topology, flow.destination)
        if located is None:
            raise PathUnknown(f"no host NIC has the address {flow.destination}")
        return int(located[1].switch_port)


class KernelNextHops:
    """Kernel switches (namespace ``<prefix>-<switch>``, port N is ``swpN``): asks each."""

    def __init__(self, prefix: str, run: IpRunner = run_ip) -> None:
        self.prefix = prefix
        self._run = run

    def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
        family = "-6" if flow.destination.version == 6 else "-4"
        argv = [
            "-n", namespace_of(self.prefix, switch), "-j", family, "route", "get",
            str(flow.destination), "from", str(flow.source), "iif", port_interface(in_port),
            "ipproto", "udp", "sport", str(flow.source_port), "dport", str(flow.destination_port),
        ]  # fmt: skip
        try:
            routes = json.loads(self._run(argv))
        except ValueError as error:
            raise PathUnknown(f"ip route get gave no JSON: {error}") from error
        if not isinstance(routes, list) or not routes or not isinstance(routes[0], dict):
            raise PathUnknown("ip route get gave no route")
        route = routes[0]
        if route.get("type") not in (None, "unicast"):
            raise PathUnknown(f"the route is {route.get('type')}")
        port = interface_port(str(route.get("dev")))
        if port is None:
            raise PathUnknown(f"the route leaves through {route.get('dev')}, not a switch port")
        return port


# -- bmv2 ----------------------------------------------------------------------------------------

ROUTE_TABLES = ("MrcIngress.routing.routes_v4", "MrcIngress.routing.routes_v6")
NEXT_TABLE = "MrcIngress.next.hashed"
MEMBER_ACTION = "MrcIngress.next.routing_hashed"
ROUTE_ACTION = "MrcIngress.routing.set_next_id"
#: The exact key of ``NEXT_TABLE``: the next-hop id a route sets.
NEXT_ID_FIELD = "next_id"
EV_FIELD_TABLE = "MrcIngress.structured_ev.ev_field"
EV_FIELD_ACTION = "MrcIngress.structured_ev.set_ev_field"
UPLINK_TABLE = "MrcIngress.structured_ev.uplinks"
UPLINK_ACTION = "MrcIngress.structured_ev.ev_uplink"


def selector_hash(flow: Flow) -> int:
    """The hash ``MrcIngress.next.hashed_selector`` computes for ``flow`` (next.p4)."""
    data = (
        int(flow.source).to_bytes(16, "big")
        + int(flow.destination).to_bytes(16, "big")
        + flow.ev.to_bytes(4, "big")
    )
    return zlib.crc32(data)


@dataclass(frozen=True)
class Member:
    """An action-profile member as BMv2 holds it: its handle, egress port and member index."""

    handle: int
    port: int
    member_index: int


@dataclass
class SwitchTables:
    """What a BMv2 switch holds that decides an egress port (parsed from simple_switch_CLI)."""

    #: (network, next_id), longest prefix first.
    routes: list[tuple[Any, int]]
    #: next_id -> ("group" | "member", handle).
    next_ids: dict[int, tuple[str, int]]
    members: dict[int, Member]
    groups: dict[int, list[int]]
    ports_up: dict[int, bool]
    #: Structured EV: (shift, mask) of this switch's EV field, None when it does not steer.
    ev_field: tuple[int, int] | None = None
    #: Structured EV: (next_id, field value) -> egress port.
    uplinks: dict[tuple[int, int], int] = field(default_factory=dict)

    def egress_port(self, flow: Flow) -> int:
        """The port this switch sends ``flow`` out of."""
        next_id = self._route(flow)
        if self.ev_field is not None:
            shift, mask = self.ev_field
            steered = self.uplinks.get((next_id, (flow.ev >> shift) & mask))
            if steered is not None:
                return steered
        kind, handle = self.next_ids.get(next_id, ("", -1))
        if kind == "member":
            return self._member(handle).port
        if kind != "group":
            raise PathUnknown(f"next hop {next_id} has no entry in {NEXT_TABLE}")
        members = [self._member(h) for h in self.groups.get(handle, ())]
        if not members:
            raise PathUnknown(f"group {handle} has no member")
        anchor = min(members, key=lambda m: m.member_index)
        active = sorted(
            (m for m in members if m is anchor or self.ports_up.get(m.port, False)),
            key=lambda m: m.handle,
        )
        return active[selector_hash(flow) % len(active)].port

    def _route(self, flow: Flow) -> int:
        for network, next_id in self.routes:
            if network.version == flow.destination.version and flow.destination in network:
                return next_id
        raise PathUnknown(f"no route to {flow.destination}")

    def _member(self, handle: int) -> Member:
        member = self.members.get(handle)
        if member is None:
            raise PathUnknown(f"member {handle} is not in the action profile")
        return member


_ENTRY = re.compile(r"^Dumping entry (0x[0-9a-f]+)$")
_KEY = re.compile(r"^\*\s*(\S+)\s*:\s*(EXACT|LPM)\s+([0-9a-f]+)(?:/(\d+))?\s*$")
_ACTION = re.compile(r"^Action entry: (\S+) - (.*)$")
_INDEX = re.compile(r"^Index: (group|member)\((\d+)\)$")
_MEMBER = re.compile(r"^Dumping member (\d+)$")
_GROUP = re.compile(r"^Dumping group (\d+)$")
_GROUP_MEMBERS = re.compile(r"^Members: \[([0-9, ]*)\]$")
_PORT = re.compile(r"^\s*(\d+)\s+(\S+)\s+(UP|DOWN)\b")


def parse_tables(text: str) -> SwitchTables:
    """The output of ``show_ports`` and ``table_dump`` of the route and next-hop tables."""
    routes: list[tuple[Any, int]] = []
    next_ids: dict[int, tuple[str, int]] = {}
    members: dict[int, Member] = {}
    groups: dict[int, list[int]] = {}
    ports_up: dict[int, bool] = {}
    ev_field: tuple[int, int] | None = None
    uplinks: dict[tuple[int, int], int] = {}
    key: tuple[str, str, int | None] | None = None
    #: The current entry's exact keys, by field name (the uplinks table has two).
    exact: dict[str, int] = {}
    member: int | None = None
    group: int | None = None
    for raw in text.splitlines():
        line = raw.strip().removeprefix("RuntimeCmd:").strip()
        if (match := _ENTRY.match(line)) or line == "Dumping default entry":
            key, member, group = None, None, None
            exact = {}
        elif match := _KEY.match(line):
            length = int(match[4]) if match[4] is not None else None
            key = (match[1], match[3], length)
            if match[2] == "EXACT":
                exact[match[1].rsplit(".", 1)[-1]] = int(match[3], 16)
        elif match := _INDEX.match(line):
            # BMv2 names a key by the field it reads (scalars.local_metadata_t.next_id), not
            # by the P4Info name the controller writes it under (next_id).
            if key is not None and key[0].rsplit(".", 1)[-1] == NEXT_ID_FIELD:
                next_ids[int(key[1], 16)] = (match[1], int(match[2]))
        elif match := _MEMBER.match(line):
            key, member, group = None, int(match[1]), None
        elif match := _GROUP.match(line):
            key, member, group = None, None, int(match[1])
        elif (match := _GROUP_MEMBERS.match(line)) and group is not None:
            groups[group] = [int(h) for h in match[1].split(",") if h.strip()]
        elif match := _ACTION.match(line):
            data = [int(v, 16) for v in match[2].split(",") if v.strip()]
            if match[1] == MEMBER_ACTION and member is not None and len(data) == 4:
                members[member] = Member(member, data[0], data[3])
            elif match[1] == ROUTE_ACTION and key is not None and key[2] is not None and data:
                address = int(key[1], 16)
                literal = IPv4Address(address) if len(key[1]) == 8 else IPv6Address(address)
                routes.append((ip_network(f"{literal}/{key[2]}", strict=False), data[0]))
            elif match[1] == EV_FIELD_ACTION and len(data) == 2:
                ev_field = (data[0], data[1])
            elif match[1] == UPLINK_ACTION and data and NEXT_ID_FIELD in exact and len(exact) == 2:
                value = next(v for name, v in exact.items() if name != NEXT_ID_FIELD)
                uplinks[(exact[NEXT_ID_FIELD], value)] = data[0]
        elif match := _PORT.match(line):
            ports_up[int(match[1])] = match[3] == "UP"
    routes.sort(key=lambda route: -route[0].prefixlen)
    return SwitchTables(routes, next_ids, members, groups, ports_up, ev_field, uplinks)


def dump_commands() -> list[str]:
    """The simple_switch_CLI commands whose output :func:`parse_tables` reads."""
    tables = (*ROUTE_TABLES, NEXT_TABLE, EV_FIELD_TABLE, UPLINK_TABLE)
    return ["show_ports", *(f"table_dump {table}" for table in tables)]


CliRunner = Callable[[list[str], int], str]


class Bmv2NextHops:
    """BMv2 switches, whose tables are read over Thrift (``thrift_ports`` by switch)."""

    def __init__(
        self,
        thrift_ports: dict[str, int],
        run_cli: CliRunner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.thrift_ports = dict(thrift_ports)
        self._run_cli = run_cli
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[float, SwitchTables]] = {}

    def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
        del in_port  # the program's choice does not depend on it
        try:
            return self.tables(switch).egress_port(flow)
        except PathUnknown:
            # The tables are dumped one after the other while the controller may be changing
            # them (a route read before its next hop was replaced): read them again, once.
            return self.tables(switch, fresh=True).egress_port(flow)

    def tables(self, switch: str, fresh: bool = False) -> SwitchTables:
        """``switch``'s tables, read again when older than ``SNAPSHOT_TTL_S`` or ``fresh``."""
        port = self.thrift_ports.get(switch)
        if port is None:
            raise PathUnknown("no Thrift port known")
        now = self._clock()
        with self._lock:
            cached = self._tables.get(switch)
            if not fresh and cached is not None and now - cached[0] < SNAPSHOT_TTL_S:
                return cached[1]
        run = self._run_cli or _thrift_cli
        try:
            text = run(dump_commands(), port)
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            raise PathUnknown(f"its tables cannot be read: {error}") from error
        tables = parse_tables(text)
        with self._lock:
            self._tables[switch] = (now, tables)
        return tables


def _thrift_cli(commands: list[str], port: int) -> str:
    from testbed.bmv2 import thrift_cli

    return thrift_cli(commands, port)
