"""A deterministic in-process network: hosts, planes, several paths per plane, failures.

Topology: each host has one address per plane. On every plane, a pair of hosts is joined by
``k`` parallel *paths*; each path is a pair of ``Link``s (one per direction) standing for the
fabric between the two top-of-rack ports. Packets pick a path the way ECMP does, by hashing
their EV, and the hash ignores direction, so a reply sent on the EV of the packet it answers
takes the same path back. Optionally each host has an uplink per plane (its NIC port,
serialising what it sends) and a downlink per plane (the last hop, shared by every path into
the host: where incast queues build; it trims to TRIMMED_LASTHOP and never ECN-marks).

Everything random (loss, reordering, marking, the ECMP salt) draws from one seeded RNG, so the
same seed gives the same run.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.config import DscpMap, MrcConfig
from agent.core.datagram import OutgoingDatagram
from agent.core.endpoint import Endpoint
from agent.sim.host import SimHost
from agent.sim.link import Link, LinkConfig
from agent.sim.packet import SimPacket
from agent.sim.scheduler import Scheduler

_EV = struct.Struct(">I")


@dataclass(slots=True)
class SimPath:
    """One path of a plane between two hosts: a link each way."""

    plane: int
    index: int
    forward: Link
    backward: Link

    def fail(self) -> None:
        """Cut the path (both directions)."""
        self.forward.fail()
        self.backward.fail()

    def repair(self) -> None:
        """Restore the path (both directions)."""
        self.forward.repair()
        self.backward.repair()

    @property
    def up(self) -> bool:
        """Whether the path forwards packets."""
        return self.forward.up


class SimNetwork:
    """Hosts and paths in simulated time."""

    def __init__(self, seed: int = 0, dscp: DscpMap | None = None) -> None:
        self.scheduler = Scheduler()
        self.rng = random.Random(seed)
        self.dscp = dscp or DscpMap()
        self.hosts: dict[str, SimHost] = {}
        self._salt = self.rng.getrandbits(32).to_bytes(4, "big")
        self._host_of_address: dict[bytes, SimHost] = {}
        self._paths: dict[tuple[str, str, int], list[SimPath]] = {}
        self._links: dict[tuple[str, str, int], list[Link]] = {}
        self._uplinks: dict[tuple[str, int], Link] = {}
        self._downlinks: dict[tuple[str, int], Link] = {}
        self.undeliverable = 0

    # --- building -------------------------------------------------------------------------

    def add_host(
        self,
        name: str,
        addresses: Sequence[bytes],
        config: MrcConfig | None = None,
        *,
        uplink: LinkConfig | None = None,
        downlink: LinkConfig | None = None,
        seed: int | None = None,
    ) -> SimHost:
        """A host with one address per plane, its endpoint, and optional NIC/last-hop links."""
        if name in self.hosts:
            raise ValueError(f"host {name!r} exists")
        endpoint = Endpoint(
            addresses,
            config,
            seed=self.rng.getrandbits(32) if seed is None else seed,
        )
        host = SimHost(name, endpoint, self.scheduler, self._send_from)
        self.hosts[name] = host
        for plane, address in enumerate(endpoint.local_addresses):
            if address in self._host_of_address:
                raise ValueError(f"address {address.hex()} is already taken")
            self._host_of_address[address] = host
            if uplink is not None:
                link = self._link(f"{name}.up{plane}", uplink, last_hop=False)
                link.deliver = self._route
                self._uplinks[(name, plane)] = link
            if downlink is not None:
                link = self._link(f"{name}.down{plane}", downlink, last_hop=True)
                link.deliver = host.receive
                self._downlinks[(name, plane)] = link
        return host

    def join(
        self,
        a: SimHost,
        b: SimHost,
        plane: int,
        paths: Sequence[LinkConfig],
        *,
        trace: bool = False,
    ) -> list[SimPath]:
        """Join ``a`` and ``b`` on ``plane`` with one path per ``LinkConfig``."""
        if not paths:
            raise ValueError("a plane needs at least one path")
        made: list[SimPath] = []
        for index, config in enumerate(paths):
            forward = self._link(f"{a.name}>{b.name}.p{plane}.{index}", config, trace=trace)
            backward = self._link(f"{b.name}>{a.name}.p{plane}.{index}", config, trace=trace)
            forward.deliver = self._make_tail(b, plane)
            backward.deliver = self._make_tail(a, plane)
            made.append(SimPath(plane, index, forward, backward))
        self._paths[(a.name, b.name, plane)] = made
        self._paths[(b.name, a.name, plane)] = made
        self._links[(a.name, b.name, plane)] = [path.forward for path in made]
        self._links[(b.name, a.name, plane)] = [path.backward for path in made]
        return made

    def paths(self, a: SimHost, b: SimHost, plane: int = 0) -> list[SimPath]:
        """The paths joining ``a`` and ``b`` on ``plane``."""
        return self._paths[(a.name, b.name, plane)]

    def fail_at(self, time: float, path: SimPath) -> None:
        """Schedule ``path`` to fail at ``time``."""
        self.scheduler.at(time, path.fail)

    def repair_at(self, time: float, path: SimPath) -> None:
        """Schedule ``path`` to come back at ``time``."""
        self.scheduler.at(time, path.repair)

    def path_index(self, ev: int, count: int) -> int:
        """ECMP: which of ``count`` paths EV ``ev`` hashes to (direction-independent)."""
        return zlib.crc32(self._salt + _EV.pack(ev)) % count

    def path_of(self, a: SimHost, b: SimHost, plane: int, ev: int) -> SimPath:
        """The path EV ``ev`` takes between ``a`` and ``b`` on ``plane``."""
        paths = self._paths[(a.name, b.name, plane)]
        return paths[self.path_index(ev, len(paths))]

    def _link(
        self, name: str, config: LinkConfig, last_hop: bool = False, trace: bool = False
    ) -> Link:
        return Link(
            name, config, self.scheduler, self.rng, self.dscp, last_hop=last_hop, trace=trace
        )

    def _make_tail(self, host: SimHost, plane: int) -> _Tail:
        return _Tail(self, host, plane)

    # --- forwarding -----------------------------------------------------------------------

    def _send_from(self, host: SimHost, datagram: OutgoingDatagram) -> None:
        packet = SimPacket(datagram)
        uplink = self._uplinks.get((host.name, datagram.plane))
        if uplink is not None:
            uplink.send(packet)
        else:
            self._route(packet)

    def _route(self, packet: SimPacket) -> None:
        source = self._host_of_address.get(packet.ip.src)
        target = self._host_of_address.get(packet.ip.dst)
        if source is None or target is None:
            self.undeliverable += 1
            return
        links = self._links.get((source.name, target.name, packet.plane))
        if not links:
            self.undeliverable += 1
            return
        links[self.path_index(packet.ev, len(links))].send(packet)

    def _last_hop(self, host: SimHost, plane: int, packet: SimPacket) -> None:
        downlink = self._downlinks.get((host.name, plane))
        if downlink is not None:
            downlink.send(packet)
        else:
            host.receive(packet)


class _Tail:
    """Where a path link hands packets: the destination's last hop (or the host itself)."""

    __slots__ = ("_host", "_network", "_plane")

    def __init__(self, network: SimNetwork, host: SimHost, plane: int) -> None:
        self._network = network
        self._host = host
        self._plane = plane

    def __call__(self, packet: SimPacket) -> None:
        self._network._last_hop(self._host, self._plane, packet)


def make_endpoint_addresses(host_index: int, planes: int, ipv6: bool = False) -> list[bytes]:
    """Packed addresses for a host: 10.<plane>.0.<host> (or fd00::<plane>:<host>)."""
    if not 1 <= host_index <= 250:
        raise ValueError("host_index must be in 1-250")
    if ipv6:
        return [
            bytes.fromhex("fd00" + "00" * 8)
            + plane.to_bytes(2, "big")
            + host_index.to_bytes(4, "big")
            for plane in range(planes)
        ]
    return [bytes([10, plane, 0, host_index]) for plane in range(planes)]
