"""Structured EV mode on the sending side: every EV a connection uses names one exact path.

With the fabric in structured EV mode (``topologies.paths``, docs/routing.md) each tier whose
switches choose among uplinks reads a field of the EV, so an EV is a path, not a hash bucket.
``mrc-agent serve --path-mode structured --topology REF`` gives the agent the fabric's
topology; for each connection it opens (its transfers', and host-API QPs of an AUTO EV
profile: ``agent.api.mrc_qp``), the agent finds both hosts' edge switches by their
plane addresses, takes the exact paths between them (``path_table``) and gives the connection
EVs spread evenly over those paths: slot ``i`` of plane ``p`` names path ``(j + o) mod P``,
``j`` being the slot's rank on its plane and ``o`` a random offset per connection and plane, so
with 256 EVs over 4 spines each spine carries 64, and a connection of one EV takes a random
path, as hashing would give it.

The EVs are the connection's for good (a given EV set, ``agent.core.ev``): a retired EV's
slot is not refilled with a random stand-in, which would name an unknown path, possibly the
dead one again. The other EVs, each naming a path of their own, carry the data meanwhile, and
the retired one's probes bring it back when its path is repaired.

Each EV's bits outside the fields are random: the source port's top two bits stay 0b11 (the
entropy range 49152-65535; the fields never reach them), and over IPv6 the flow label bits
(EV bits 15-0) are random too. The receiver answers on the EV it was sent on, so its SACKs
and probes climb from the destination edge switch by the same field values (docs/routing.md
says when that is exactly the reverse path).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from ipaddress import ip_address

from topologies.model import Topology
from topologies.paths import EV_FIELD_BASE, EV_FIELD_BITS, PathTable, path_table

#: The entropy source-port range's top two bits, above every structured field.
_PORT_BASE = 0xC000


class StructuredEvs:
    """Chooses a connection's EVs so that each names one exact path of ``topology``."""

    def __init__(self, topology: Topology, local_addresses: Sequence[bytes], seed: int) -> None:
        self._table: PathTable = path_table(topology)
        self._edge_by_address: dict[bytes, str] = {}
        for _, nic in topology.nics():
            self._edge_by_address[nic.ipv4.ip.packed] = nic.switch
            self._edge_by_address[nic.ipv6.ip.packed] = nic.switch
        self._local = tuple(local_addresses)
        unknown = [a for a in self._local if a not in self._edge_by_address]
        if unknown:
            raise ValueError(
                f"{', '.join(str(ip_address(a)) for a in unknown)}: not a host address of "
                f"topology {topology.name!r}"
            )
        self._rng = random.Random(seed)

    def evs_for(self, remote: Sequence[bytes], count: int) -> tuple[tuple[int, int], ...] | None:
        """``count`` (plane, EV) pairs toward a peer with plane addresses ``remote``, spread
        evenly over the exact paths of each plane; None when a remote address is not a host
        of the topology, or not on this plane (the connection then draws random EVs, as in ECMP
        mode)."""
        planes = min(len(self._local), len(remote))
        per_plane = []
        for plane in range(planes):
            destination = self._edge_by_address.get(remote[plane])
            if destination is None:
                return None
            source = self._edge_by_address[self._local[plane]]
            try:
                per_plane.append(self._table.between(source, destination))
            except KeyError:  # the peer's address of this plane is on another plane's switch
                return None
        ipv6 = len(self._local[0]) == 16
        width = sum(field.width for field in self._table.layout.fields)
        distinct = 1 << (EV_FIELD_BITS - width + (EV_FIELD_BASE if ipv6 else 0))
        if count > distinct * min(len(paths) for paths in per_plane) * planes:
            raise ValueError(f"{count} EVs: more than the paths' distinct structured EVs")
        used: set[tuple[int, int]] = set()
        homes = []
        # Each plane's round starts at a random path, as a hash would land: a connection of
        # one EV (the single-path baseline) then takes any path, not always the first.
        offsets = [self._rng.randrange(len(paths)) for paths in per_plane]
        for slot in range(count):
            plane, rank = slot % planes, slot // planes
            paths = per_plane[plane]
            path = paths[(rank + offsets[plane]) % len(paths)]
            while True:
                port = _PORT_BASE | self._rng.getrandbits(EV_FIELD_BITS)
                base = port << EV_FIELD_BASE
                if ipv6:
                    base |= self._rng.getrandbits(EV_FIELD_BASE)
                ev = path.structured_ev(self._table.layout, base)
                if (plane, ev) not in used:
                    break
            used.add((plane, ev))
            homes.append((plane, ev))
        return tuple(homes)
