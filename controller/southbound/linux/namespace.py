"""Netlink into one switch's namespace: its ports, what it holds, writes, counters, link events.

The only module that talks to the kernel (with pyroute2, plus ``tc`` for shapers, whose
command line is the contract's shared rendering, and ``ip`` for the SRv6 seg6local routes,
whose NEXT-C-SID flavour pyroute2 cannot write); everything it returns is plain data from
:mod:`.state` and :mod:`controller.southbound.interface`.

A namespace is reached by name under ``/run/netns``. An open netlink socket keeps a namespace
alive after its name is gone (a runner that tears a switch down removes the name), so the
namespace's identity (the inode its name points at) is remembered on opening, and
:meth:`SwitchNamespace.still_there` tells a removed or replaced namespace from a live one.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from ipaddress import IPv6Network, ip_address, ip_network
from pathlib import Path
from typing import Any

from pyroute2 import AsyncIPRoute
from pyroute2 import config as pyroute2_config
from pyroute2.netlink.rtnl import RTMGRP_LINK

from controller.southbound.interface import EntityFailure, PortCounters, SouthboundError
from controller.southbound.linux.diff import KernelPlan, burst_from_ticks
from controller.southbound.linux.ecn import (
    ECN_QDISC_PREFERENCE,
    MARKER_PARENT,
    SHAPER_HANDLE,
    EcnMarker,
    plain_fifo,
)
from controller.southbound.linux.names import (
    ROUTE_PROTOCOL,
    interface_port,
    is_gateway,
    port_interface,
)
from controller.southbound.linux.seg6 import MAIN_TABLE, Seg6LocalRoute, seg6local_of
from controller.southbound.linux.seg6 import ROUTE_DEVICE as USID_DEVICE
from controller.southbound.linux.state import (
    KernelRoute,
    KernelState,
    Neighbour,
    NextHop,
    Prefix,
)
from hostenv.tbf import TbfParameters

# pyroute2 opens a socket inside a namespace from a forked child (a copy of this process),
# which it stops with SIGTERM once the socket is handed over. The copy keeps this process's
# signal handlers: a test's SIGTERM handler would run there (unwinding a copy of the test), and
# asyncio's signal wakeup descriptor, shared with the parent, would carry the signal to the
# real controller's loop, which stops on SIGTERM. With this flag the child first resets
# SIGINT and SIGTERM to their defaults (pyroute2 applies it in every child-process mode).
pyroute2_config.disable_mp_signal = True

NETNS_DIR = Path("/run/netns")
NUD_PERMANENT = 0x80
RTNH_F_ONLINK = 0x4
IFF_UP = 0x1
TC_TIMEOUT_S = 10.0  # for every iproute2 command, tc and ip alike
PSCHED = Path("/proc/net/psched")


class NamespaceUnavailable(SouthboundError):
    """The switch's namespace does not exist (yet, or any more) or cannot be opened."""


@dataclass(frozen=True)
class PortLink:
    """A switch port's interface: index, MAC, and whether it passes traffic (admin up and
    carrier)."""

    port: int
    ifindex: int
    mac: str
    up: bool


def namespace_identity(name: str) -> int:
    """The inode ``name`` points at (changes when the namespace is replaced)."""
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError as error:
        raise NamespaceUnavailable(f"network namespace {name!r} not found: {error}") from None


async def _open_socket(name: str, *, groups: int | None = None) -> AsyncIPRoute:
    # flags=0: never create the namespace (pyroute2 creates missing ones by default).
    ipr = AsyncIPRoute(netns=name, flags=0, **({} if groups is None else {"groups": groups}))
    try:
        if groups is not None:
            await ipr.bind(groups=groups)
        else:
            await ipr.setup_endpoint()
    except OSError as error:
        ipr.close()
        raise NamespaceUnavailable(f"cannot open namespace {name!r}: {error}") from None
    return ipr


class SwitchNamespace:
    """A netlink channel into one switch's namespace (see the module docs)."""

    def __init__(self, name: str, ipr: AsyncIPRoute, identity: int) -> None:
        self.name = name
        self._ipr = ipr
        self._identity = identity
        self._closed = False
        #: The markers this southbound wrote, by port: the kernel reads a marker back as its
        #: kind only (:class:`EcnMarker`), so its arguments are taken from here when the kind
        #: held is the kind written.
        self._written_markers: dict[int, EcnMarker] = {}
        self._usid_device_ready = False

    @classmethod
    async def open(cls, name: str) -> SwitchNamespace:
        """Open ``name``; :class:`NamespaceUnavailable` when it does not exist."""
        identity = namespace_identity(name)
        return cls(name, await _open_socket(name), identity)

    def still_there(self) -> bool:
        """Whether the name still points at the namespace this channel is in."""
        try:
            return namespace_identity(self.name) == self._identity
        except NamespaceUnavailable:
            return False

    def close(self) -> None:
        """Close the channel (the namespace itself is left alone); closing twice is harmless
        (a second close of a socket could hit a reused descriptor)."""
        if not self._closed:
            self._closed = True
            self._ipr.close()

    # -- reading -------------------------------------------------------------------------------
    async def ports(self) -> dict[int, PortLink]:
        """Every ``swpN`` interface, by port."""
        links = {}
        async for message in await self._ipr.link("dump"):
            link = port_link(message)
            if link is not None:
                links[link.port] = link
        return links

    async def read_state(self, ports: Mapping[int, PortLink]) -> KernelState:
        """The routes of the southbound's protocol, its neighbour entries and the shapers."""
        port_of = {link.ifindex: port for port, link in ports.items()}
        routes: dict[Prefix, KernelRoute] = {}
        seg6local: dict[IPv6Network, Seg6LocalRoute] = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            async for message in await self._ipr.route("dump", family=family):
                route = _route_of(message, port_of)
                if isinstance(route, Seg6LocalRoute):
                    seg6local[route.prefix] = route
                elif route is not None:
                    routes[route.prefix] = route
        neighbours = {}
        async for message in await self._ipr.neigh("dump"):
            neighbour = _neighbour_of(message, port_of)
            if neighbour is not None:
                neighbours[neighbour.key] = neighbour
        shapers = {}
        markers = {}
        async for message in await self._ipr.get_qdiscs():
            port = port_of.get(message["index"])
            if port is None:
                continue
            shaper = _shaper_of(message)
            if shaper is not None:
                shapers[port] = shaper
            marker = _marker_of(message)
            if marker is not None:
                written = self._written_markers.get(port)
                markers[port] = written if written and written.kind == marker.kind else marker
        return KernelState(routes, neighbours, shapers, markers, seg6local)

    async def counters(self, ports: Mapping[int, PortLink]) -> dict[int, PortCounters]:
        """Per-port packets, bytes and drops (the interface's plus its root qdisc's)."""
        port_of = {link.ifindex: port for port, link in ports.items()}
        qdisc_drops: dict[int, int] = {}
        async for message in await self._ipr.get_qdiscs():
            port = port_of.get(message["index"])
            stats = message.get("stats")
            if port is not None and stats:
                qdisc_drops[port] = int(stats.get("drop", 0))
        counters = {}
        async for message in await self._ipr.link("dump"):
            port = port_of.get(message["index"])
            stats = message.get("stats64")
            if port is None or not stats:
                continue
            counters[port] = PortCounters(
                rx_packets=stats["rx_packets"],
                rx_bytes=stats["rx_bytes"],
                tx_packets=stats["tx_packets"],
                tx_bytes=stats["tx_bytes"],
                drops=stats["rx_dropped"] + stats["tx_dropped"] + qdisc_drops.get(port, 0),
            )
        return counters

    # -- writing -------------------------------------------------------------------------------
    async def apply(
        self, plan: KernelPlan, ports: Mapping[int, PortLink]
    ) -> tuple[int, list[EntityFailure]]:
        """Write ``plan`` in its order; every write is tried, failures come back described.
        Returns the number of requests sent and the failures."""
        failures: list[EntityFailure] = []
        requests = 0

        async def attempt(entity: str, write: Any) -> None:
            nonlocal requests
            requests += 1
            try:
                await write
            except Exception as error:  # netlink and tc errors: reported, never fatal
                failures.append(EntityFailure(entity, str(error) or type(error).__name__))

        for neighbour in plan.set_neighbours:
            await attempt(
                f"neighbour {_describe_neighbour(neighbour)}", self._set_neighbour(neighbour, ports)
            )
        for route in plan.set_routes:
            await attempt(f"route {route.prefix}", self._set_route(route, ports))
        for usid_route in plan.set_seg6local:
            await attempt(
                f"seg6local {usid_route.action.label} route {usid_route.prefix}",
                self._set_seg6local(usid_route),
            )
        for usid_route in plan.delete_seg6local:
            await attempt(
                f"seg6local route {usid_route.prefix} (delete)",
                self._delete_route(usid_route),
            )
        for route in plan.delete_routes:
            await attempt(f"route {route.prefix} (delete)", self._delete_route(route))
        for neighbour in plan.delete_neighbours:
            await attempt(
                f"neighbour {_describe_neighbour(neighbour)} (delete)",
                self._delete_neighbour(neighbour, ports),
            )
        for port, shaper in plan.set_shapers:
            await attempt(
                f"tbf on {port_interface(port)}",
                self._tc(
                    "qdisc",
                    "replace",
                    "dev",
                    port_interface(port),
                    "root",
                    "handle",
                    SHAPER_HANDLE,
                    *shaper.tc_arguments(),
                ),
            )
        for port in plan.delete_shapers:
            await attempt(
                f"tbf on {port_interface(port)} (delete)",
                self._tc("qdisc", "del", "dev", port_interface(port), "root"),
            )
            self._written_markers.pop(port, None)
        for port, shaper, marker in plan.set_markers:
            await attempt(
                f"{marker.kind} ECN marker on {port_interface(port)}",
                self._set_marker(port, shaper, marker),
            )
        for port, shaper in plan.unset_markers:
            await attempt(
                f"ECN marker on {port_interface(port)} (delete)",
                self._set_marker(port, shaper, plain_fifo(shaper)),
            )
        return requests, failures

    async def _set_neighbour(self, neighbour: Neighbour, ports: Mapping[int, PortLink]) -> None:
        await self._ipr.neigh(
            "replace",
            dst=str(neighbour.address),
            lladdr=neighbour.mac,
            ifindex=_ifindex(ports, neighbour.port),
            state=NUD_PERMANENT,
            family=_family(neighbour.address.version),
        )

    async def _delete_neighbour(self, neighbour: Neighbour, ports: Mapping[int, PortLink]) -> None:
        await self._ipr.neigh(
            "del",
            dst=str(neighbour.address),
            ifindex=_ifindex(ports, neighbour.port),
            family=_family(neighbour.address.version),
        )

    async def _set_route(self, route: KernelRoute, ports: Mapping[int, PortLink]) -> None:
        v4 = route.prefix.version == 4
        nexthops = [
            {
                "gateway": str(nexthop.gateway),
                "oif": _ifindex(ports, nexthop.port),
                **({"flags": RTNH_F_ONLINK} if v4 else {}),
            }
            for nexthop in route.nexthops
        ]
        await self._ipr.route(
            "replace",
            dst=str(route.prefix),
            family=_family(route.prefix.version),
            table=MAIN_TABLE,
            proto=ROUTE_PROTOCOL,
            multipath=nexthops,
        )

    async def _set_seg6local(self, route: Seg6LocalRoute) -> None:
        try:
            await self._ensure_usid_device()
            await self._write_seg6local(route)
        except Exception:
            self._usid_device_ready = False  # removed or set down by another hand: remake it
            raise

    async def _write_seg6local(self, route: Seg6LocalRoute) -> None:
        # iproute2, not pyroute2: pyroute2 has no attribute for the NEXT-C-SID flavour.
        await self._run(
            "ip", "-n", self.name, "-6", "route", "replace", str(route.prefix),
            "table", str(MAIN_TABLE), "proto", str(ROUTE_PROTOCOL), *route.ip_arguments(),
        )  # fmt: skip

    async def _ensure_usid_device(self) -> None:
        """The dummy interface the seg6local routes name, made and brought up once."""
        if self._usid_device_ready:
            return
        if not await self._ipr.link_lookup(ifname=USID_DEVICE):
            await self._ipr.link("add", ifname=USID_DEVICE, kind="dummy")
        (index,) = await self._ipr.link_lookup(ifname=USID_DEVICE)
        await self._ipr.link("set", index=index, state="up")
        self._usid_device_ready = True

    async def _delete_route(self, route: KernelRoute | Seg6LocalRoute) -> None:
        await self._ipr.route(
            "del",
            dst=str(route.prefix),
            family=_family(route.prefix.version),
            table=MAIN_TABLE,
            proto=ROUTE_PROTOCOL,
        )

    async def _set_marker(self, port: int, shaper: TbfParameters, marker: EcnMarker) -> None:
        """Re-assert the port's ``tbf`` under :data:`SHAPER_HANDLE` (a ``tbf`` written by
        another hand may have another handle; under the same one this changes nothing), then
        graft ``marker`` as its child: a replace without a handle swaps a child of another kind
        and changes one of the same kind."""
        interface = port_interface(port)
        self._written_markers.pop(port, None)
        await self._tc(
            "qdisc", "replace", "dev", interface, "root", "handle", SHAPER_HANDLE,
            *shaper.tc_arguments(),
        )  # fmt: skip
        await self._tc(
            "qdisc", "replace", "dev", interface, "parent", MARKER_PARENT, *marker.tc_arguments()
        )
        if marker.kind in ECN_QDISC_PREFERENCE:
            self._written_markers[port] = marker

    async def _tc(self, *arguments: str) -> None:
        await self._run("tc", "-n", self.name, *arguments)

    @staticmethod
    async def _run(*command: str) -> None:
        """Run an iproute2 tool; OSError with what it said if it fails or hangs."""
        process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, stderr = await asyncio.wait_for(process.communicate(), TC_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise OSError(f"{command[0]} took over {TC_TIMEOUT_S} s") from None
        if process.returncode != 0:
            said = " ".join(command[3:] if command[1] == "-n" else command[1:])
            raise OSError(f"{command[0]} {said}: {stderr.decode().strip()}")


class LinkWatch:
    """Link events (carrier, admin state) of one namespace's ports, as :class:`PortLink`."""

    def __init__(self, ipr: AsyncIPRoute) -> None:
        self._ipr = ipr
        self._closed = False

    @classmethod
    async def open(cls, name: str) -> LinkWatch:
        """Subscribe to ``name``'s link events (before reading the initial state, so that no
        change falls between the two)."""
        return cls(await _open_socket(name, groups=RTMGRP_LINK))

    async def events(self) -> AsyncGenerator[PortLink, None]:
        """Every link message about a port, as it comes (RTM_NEWLINK; a deleted interface is
        reported down)."""
        while True:
            async for message in self._ipr.get():
                link = port_link(message)
                if link is not None:
                    yield link

    def close(self) -> None:
        """Stop watching (once; see :meth:`SwitchNamespace.close`)."""
        if not self._closed:
            self._closed = True
            self._ipr.close()


def port_link(message: Any) -> PortLink | None:
    """A link message as a port's state, or None for interfaces that are no port."""
    ifname = message.get("ifname")
    port = interface_port(ifname) if isinstance(ifname, str) else None
    if port is None:
        return None
    deleted = message.get("event") == "RTM_DELLINK"
    up = not deleted and bool(message["flags"] & IFF_UP) and message.get("carrier") == 1
    return PortLink(port, message["index"], str(message.get("address") or "").lower(), up)


def _route_of(message: Any, port_of: Mapping[int, int]) -> KernelRoute | Seg6LocalRoute | None:
    if message["proto"] != ROUTE_PROTOCOL or message.get("table") != MAIN_TABLE:
        return None
    family_zero = "0.0.0.0" if message["family"] == socket.AF_INET else "::"
    prefix = ip_network(f"{message.get('dst') or family_zero}/{message['dst_len']}")
    if isinstance(prefix, IPv6Network):
        usid_route = seg6local_of(message, prefix)
        if usid_route is not None:
            return usid_route
    hops = message.get("multipath") or [message]
    nexthops = []
    for hop in hops:
        gateway = hop.get("gateway")
        # A next hop on an interface that is no port (or without a gateway) is not one the
        # southbound would write: port 0 makes the diff rewrite the route.
        port = port_of.get(hop.get("oif") or 0, 0)
        if gateway is not None:
            nexthops.append(NextHop(port, ip_address(gateway)))
        else:
            nexthops.append(NextHop(0, ip_address(family_zero)))
    return KernelRoute(prefix, tuple(sorted(nexthops, key=lambda nexthop: nexthop.port)))


def _neighbour_of(message: Any, port_of: Mapping[int, int]) -> Neighbour | None:
    destination, mac = message.get("dst"), message.get("lladdr")
    port = port_of.get(message["ifindex"])
    if port is None or destination is None or not message["state"] & NUD_PERMANENT:
        return None
    address = ip_address(destination)
    if not is_gateway(address):
        return None
    return Neighbour(port, address, str(mac or "").lower())


def _shaper_of(message: Any) -> TbfParameters | None:
    if message.get("kind") != "tbf" or message["parent"] != 0xFFFFFFFF:
        return None
    options = message.get("options")
    parameters = options.get("TCA_TBF_PARMS") if options is not None else None
    if not parameters:
        return None
    rate_bytes = int(parameters["rate"])
    return TbfParameters(
        rate_bits_per_s=rate_bytes * 8,
        burst_bytes=burst_from_ticks(int(parameters["buffer"]), rate_bytes, ticks_per_us()),
        limit_bytes=int(parameters["limit"]),
    )


#: ``1:1`` as the kernel numbers a parent: major 1, minor 1.
MARKER_PARENT_ID = 0x0001_0001


def _marker_of(message: Any) -> EcnMarker | None:
    """An ECN-capable qdisc under a ``tbf`` of handle ``1:``, by kind only (see
    :class:`EcnMarker`)."""
    kind = message.get("kind")
    if kind not in ECN_QDISC_PREFERENCE or message["parent"] != MARKER_PARENT_ID:
        return None
    return EcnMarker(kind)


@functools.cache
def ticks_per_us() -> float:
    """The kernel's packet-scheduler clock, as tc reads it from ``/proc/net/psched``."""
    t2us, us2t, clock_res, _ = (int(field, 16) for field in PSCHED.read_text().split())
    return t2us / us2t * clock_res / 1_000_000


def _ifindex(ports: Mapping[int, PortLink], port: int) -> int:
    link = ports.get(port)
    if link is None:
        raise SouthboundError(f"no interface {port_interface(port)} in the namespace")
    return link.ifindex


def _family(version: int) -> int:
    return socket.AF_INET if version == 4 else socket.AF_INET6


def _describe_neighbour(neighbour: Neighbour) -> str:
    return f"{neighbour.address} on {port_interface(neighbour.port)} -> {neighbour.mac}"
