"""SRv6 uSID mode on the sending side: which carrier (outer IPv6 destination) a datagram takes.

With the fabric in SRv6 mode (``topologies.paths``, docs/routing.md) a packet names its path
itself: the host wraps it in an outer IPv6 header whose destination lists every switch of the
path as a 16-bit uSID, and each switch only shifts that list and forwards. The agent keeps the
EV as the name of the path, exactly as in structured EV mode: a connection's EVs come from
``StructuredEvs`` (each EV's fields hold one path's uplink choices), and this module turns an
EV back into that path's carrier, so the EV state machine needs no change (a retired EV is a
dead path, its probes test that path and no other).

Which path an EV names depends on who sends the datagram:

* a *request* (data, a reliability probe, an endpoint request: what the connection's sender
  originates) takes the path from this host's edge switch to the peer's whose uplink choices
  the EV's fields hold, a field value ``v`` choosing uplink ``v mod n`` as a switch in
  structured mode would;
* an MRC *answer* (ACK, SACK, NACK, an endpoint response), which is sent on the EV of the
  packet it answers, travels that packet's path backwards: the path the peer's request took is
  found from the peer's edge switch, and its reverse (``PathTable.reverse``) carries the
  answer, so SACKs, NACKs and probe replies follow exactly the switches they answer for.

The RoCE baseline is one path each way, as an RC QP is: its ACKs, NAKs and CNPs leave from the
responder's own QP source port, an EV of their own, and are routed as requests on it.

A peer whose address is no host of the topology, or is on another plane, has no carrier: the
datagram then goes without one (the fabric routes it by its hashed groups) and is counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import ip_address

from topologies.model import Topology
from topologies.paths import EvField, FabricPath, PathTable, path_table, uplinks
from wire.constants import Opcode

#: First bytes (BTH opcodes) of the datagrams that answer another: they take the reverse path.
ANSWER_OPCODES = frozenset(
    {
        Opcode.ACK,
        Opcode.SACK,
        Opcode.NACK,
        Opcode.EP_RESPONSE,
    }
)


class _PairPaths:
    """The paths from one edge switch to another, each with the hops that choose it."""

    def __init__(self, table: PathTable, topology: Topology, source: str, destination: str):
        #: Per path: for each switch on it that picks an uplink, the EV field it reads, how
        #: many uplinks it has (its own count: tiers need not be uniform) and the one taken.
        self.paths: list[tuple[FabricPath, tuple[tuple[EvField, int, int], ...]]] = []
        for path in table.between(source, destination):
            hops = []
            for tier, index in path.choices:
                field = table.layout.field(tier)
                if field is None:  # path_table records choices only where a field exists
                    raise AssertionError(f"tier {tier} chooses an uplink but has no EV field")
                climbing = next(s for s in path.switches if topology.switch(s).tier == tier)
                hops.append((field, len(uplinks(topology, topology.switch(climbing))), index))
            self.paths.append((path, tuple(hops)))

    def path_of(self, ev: int) -> FabricPath:
        """The path switches in structured mode would send ``ev`` along: the one each of whose
        choosing switches takes the uplink its field value names, modulo its own uplinks."""
        for path, hops in self.paths:
            if all(field.value_of(ev) % n == index for field, n, index in hops):
                return path
        raise KeyError(f"no path takes EV {ev:#x}")


class Srv6Carriers:
    """The carrier of each datagram this host sends, from the fabric's ``topology``."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._table = path_table(topology)
        self._edge_by_address: dict[bytes, str] = {}
        for _, nic in topology.nics():
            self._edge_by_address[nic.ipv6.ip.packed] = nic.switch
        self._pairs: dict[tuple[str, str], _PairPaths] = {}
        self._carriers: dict[tuple[bytes, bytes, int, bool], bytes | None] = {}
        mask = 0
        for field in self._table.layout.fields:
            mask |= field.mask << field.shift
        self._ev_mask = mask

    def check_local(self, addresses: Sequence[bytes]) -> None:
        """ValueError unless every address is an IPv6 host address of the topology: the
        carriers start at the edge switches those addresses are plugged into."""
        wrong = [a for a in addresses if a not in self._edge_by_address]
        if wrong:
            raise ValueError(
                f"{', '.join(str(ip_address(a)) for a in wrong)}: not an IPv6 host address of "
                f"topology {self._topology.name!r} (SRv6 mode runs the agents over IPv6)"
            )

    def carrier(self, src: bytes, dst: bytes, ev: int, answer: bool) -> bytes | None:
        """The packed outer destination for a datagram from ``src`` to ``dst`` on ``ev``
        (``answer``: it answers a datagram the peer sent on ``ev``); None when the peer is
        not reachable by a carrier (module docs)."""
        key = (src, dst, ev & self._ev_mask, answer)
        try:
            return self._carriers[key]
        except KeyError:
            pass
        found = self._resolve(src, dst, ev, answer)
        self._carriers[key] = found
        return found

    def path(self, src: bytes, dst: bytes, ev: int, answer: bool) -> FabricPath | None:
        """The path behind :meth:`carrier`."""
        local = self._edge_by_address.get(src)
        remote = self._edge_by_address.get(dst)
        if local is None or remote is None:
            return None
        try:
            if answer:
                return self._table.reverse(self._pair(remote, local).path_of(ev))
            return self._pair(local, remote).path_of(ev)
        except KeyError:  # the edges are on different planes
            return None

    def _resolve(self, src: bytes, dst: bytes, ev: int, answer: bool) -> bytes | None:
        path = self.path(src, dst, ev, answer)
        return None if path is None else path.carrier.packed

    def _pair(self, source: str, destination: str) -> _PairPaths:
        pair = self._pairs.get((source, destination))
        if pair is None:
            pair = self._pairs[(source, destination)] = _PairPaths(
                self._table, self._topology, source, destination
            )
        return pair


def is_answer(payload: bytes) -> bool:
    """Whether a datagram whose UDP payload is ``payload`` answers another (its opcode)."""
    return bool(payload) and payload[0] in ANSWER_OPCODES
