"""The static tables of structured EV and SRv6 uSID routing, from the topology alone.

Both modes let the sender name its path exactly, so the fabric holds fixed tables and never
recomputes them: a path through a dead link stays dead, and the endpoints stop using the EVs
that name it (docs/routing.md). These tables are therefore a function of the topology only,
never of link state, and the routing policies' pruning leaves them alone.

* structured (``PathMode.STRUCTURED``): each switch that chooses among uplinks learns where its
  tier's field sits in the EV, and for every group toward a remote edge switch that it reaches
  over all its uplinks (``topologies.paths.steers``), one entry per field value: value ``v``
  leaves by uplink ``v mod n``. Field values run over the whole field, so every EV is steered.
* SRv6 (``PathMode.SRV6``): each switch owns its uSID in its plane's block, and knows, per
  neighbouring switch, the port (the lowest, over parallel links) a carrier whose next uSID
  names that neighbour leaves by.

``PathMode.ECMP`` adds nothing: the EV-hashed groups alone forward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.intent.model import (
    EvFieldIntent,
    EvUplink,
    LocalUsid,
    NextHopMember,
    UsidNextHop,
)
from controller.intent.routing import group_ids
from topologies.model import Switch, Topology
from topologies.paths import (
    EvLayout,
    PathMode,
    ev_layout,
    neighbour_ports,
    shortest_ports,
    steers,
    switch_usid,
    usid_block,
)


@dataclass(frozen=True)
class PathTables:
    """One switch's structured EV and SRv6 tables (empty in the modes that do not use them)."""

    ev_field: EvFieldIntent | None = None
    ev_uplinks: tuple[EvUplink, ...] = ()
    local_usids: tuple[LocalUsid, ...] = ()
    usid_next_hops: tuple[UsidNextHop, ...] = ()


class PathTableBuilder:
    """Computes each switch's :class:`PathTables` for one topology and mode, deriving the
    fabric-wide facts (EV layout, shortest ports) once."""

    def __init__(self, topology: Topology, mode: PathMode) -> None:
        self._topology = topology
        self._mode = PathMode(mode)
        if self._mode is PathMode.STRUCTURED:
            self._layout: EvLayout | None = ev_layout(topology)
            self._toward: Mapping[str, Mapping[str, tuple[int, ...]]] = shortest_ports(topology)
        else:
            self._layout = None
            self._toward = {}

    def for_switch(self, switch: Switch, members: Mapping[int, NextHopMember]) -> PathTables:
        """The tables of ``switch``, whose members (by port) give the MACs of each port."""
        if self._mode is PathMode.STRUCTURED:
            return self._structured(switch, members)
        if self._mode is PathMode.SRV6:
            return self._srv6(switch, members)
        return PathTables()

    def _structured(self, switch: Switch, members: Mapping[int, NextHopMember]) -> PathTables:
        assert self._layout is not None
        field = self._layout.field(switch.tier)
        if field is None:
            return PathTables()
        _, remote_ids = group_ids(self._topology, switch)
        entries = []
        for edge, group_id in remote_ids.items():
            ports = self._toward[edge].get(switch.name, ())
            if not steers(self._topology, switch, ports):
                continue
            for value in range(field.mask + 1):
                member = members[ports[value % len(ports)]]
                entries.append(
                    EvUplink(group_id, value, member.egress_port, member.src_mac, member.dst_mac)
                )
        return PathTables(
            ev_field=EvFieldIntent(field.shift, field.width), ev_uplinks=tuple(sorted(entries))
        )

    def _srv6(self, switch: Switch, members: Mapping[int, NextHopMember]) -> PathTables:
        block = usid_block(switch.plane)
        next_hops = []
        for name, port in neighbour_ports(self._topology, switch).items():
            member = members[port]
            usid = switch_usid(self._topology.switch(name))
            next_hops.append(
                UsidNextHop(block, usid, member.egress_port, member.src_mac, member.dst_mac)
            )
        return PathTables(
            local_usids=(LocalUsid(block, switch_usid(switch)),),
            usid_next_hops=tuple(sorted(next_hops)),
        )
