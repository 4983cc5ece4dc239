"""One simulated switch: what ``mrc.p4`` does to a packet, reduced to where it sends it.

A packet's destination address selects a next-hop group by longest-prefix match over the
routes of the switch's intent; the group's live members are hashed over by the packet's
addresses and EV (CRC-32 mixed with a per-switch seed, as each kernel namespace and each ASIC
seeds its own hash, so that consecutive tiers do not make the same choice); the member's egress port
queues it. A member whose port has no carrier is skipped at once, as ``watch_port`` does on
BMv2 and ``ignore_routes_with_linkdown`` in the kernel; a destination whose every member is
dead, or that no route covers, is dropped and counted (``no_route``). Queueing, ECN marking and
trimming happen in the egress port's ``agent.sim.link.Link``.

Routes are resolved once per install for every host address the fabric has, so forwarding is
two dictionary lookups and a CRC, not a route walk per packet.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from agent.sim.link import Link
from agent.sim.packet import SimPacket
from controller.intent.model import SwitchIntent

#: Knuth's multiplicative hashing constant (2^32 / golden ratio).
_GOLDEN = 0x9E3779B1


class SimSwitch:
    """Forwarding state and egress ports of one switch."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        #: Egress of each port: the link direction leaving it.
        self.egress: dict[int, Link] = {}
        self.port_up: dict[int, bool] = {}
        #: Packets dropped for want of a route or of a live next hop.
        self.no_route = 0
        self.forwarded = 0
        self._seed = seed & 0xFFFFFFFF
        self._ports_to: dict[bytes, tuple[int, ...]] = {}
        self._live_to: dict[bytes, tuple[Link, ...]] = {}

    def attach(self, port: int, egress: Link) -> None:
        """Plug ``egress`` into ``port`` (its carrier up)."""
        self.egress[port] = egress
        self.port_up[port] = True

    def install(self, intent: SwitchIntent, addresses: Iterable[bytes]) -> None:
        """Hold ``intent``'s routes and groups, resolved for each of ``addresses`` (packed)."""
        resolve = _longest_prefix_match(intent)
        ports_of = {group.group_id: group.ports for group in intent.groups}
        ports_to: dict[bytes, tuple[int, ...]] = {}
        for packed in addresses:
            next_id = resolve(packed)
            if next_id is not None:
                ports_to[packed] = ports_of[next_id]
        self._ports_to = ports_to
        self._refresh()

    def set_carrier(self, port: int, up: bool) -> None:
        """The port's link went down or came back: its members are skipped or used again."""
        if self.port_up.get(port) == up:
            return
        self.port_up[port] = up
        self._refresh()

    def ports_toward(self, address: bytes) -> tuple[int, ...]:
        """Egress ports of the live members toward ``address``, in member order."""
        up = self.port_up
        return tuple(port for port in self._ports_to.get(address, ()) if up.get(port, False))

    def egress_port(self, packet: SimPacket) -> int | None:
        """Where ``packet`` leaves (None: dropped for no route); the forwarding decision alone."""
        ports = self.ports_toward(packet.ip.dst)
        if not ports:
            return None
        return ports[self._hash(packet) % len(ports)]

    def receive(self, packet: SimPacket) -> None:
        """A packet arrived on any port: forward it or drop it."""
        links = self._live_to.get(packet.ip.dst)
        if not links:
            self.no_route += 1
            return
        self.forwarded += 1
        links[self._hash(packet) % len(links)].send(packet)

    def _hash(self, packet: SimPacket) -> int:
        ip = packet.ip
        crc = zlib.crc32(ip.src + ip.dst + packet.ev.to_bytes(4, "big"))
        # CRC is affine: seeding it only XORs every result with a constant, which permutes the
        # members the same way for every flow, and the tiers' choices stay correlated (hash
        # polarisation). A multiplicative mix of the seeded value decorrelates them.
        return (((crc ^ self._seed) * _GOLDEN) & 0xFFFFFFFF) >> 8

    def _refresh(self) -> None:
        up = self.port_up
        egress = self.egress
        live: dict[tuple[int, ...], tuple[Link, ...]] = {}  # one tuple per group, shared
        for ports in self._ports_to.values():
            if ports not in live:
                live[ports] = tuple(egress[port] for port in ports if up.get(port, False))
        self._live_to = {address: live[ports] for address, ports in self._ports_to.items()}


def _longest_prefix_match(intent: SwitchIntent) -> Callable[[bytes], int | None]:
    """A resolver of a packed address to the next-hop id of its longest matching route: one
    dictionary per prefix length, keyed by the address's leading bits."""
    tables: dict[tuple[int, int], dict[int, int]] = {}
    for route in (*intent.routes_v4, *intent.routes_v6):
        prefix = route.prefix
        bits = prefix.max_prefixlen
        leading = int(prefix.network_address) >> (bits - prefix.prefixlen)
        tables.setdefault((bits, prefix.prefixlen), {})[leading] = route.next_id
    longest_first = sorted(tables, key=lambda key: -key[1])

    def resolve(packed: bytes) -> int | None:
        bits = len(packed) * 8
        value = int.from_bytes(packed, "big")
        for table_bits, length in longest_first:
            if table_bits == bits:
                found = tables[(table_bits, length)].get(value >> (bits - length))
                if found is not None:
                    return found
        return None

    return resolve
