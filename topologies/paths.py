"""Exact paths through a fabric: what structured EV and SRv6 uSID routing name, per topology.

Three ways to pick a path (``PathMode``): ECMP hashes the entropy value (EV); *structured EV*
gives each tier a field of the EV that names the uplink taken there; *SRv6* carries the path's
switches as 16-bit uSIDs in an outer IPv6 destination. The last two need the same facts about
the topology, derived here once and shared by the controller (which programs the switches'
static tables from them: ``controller.intent.path_tables``) and the endpoints (which pick a
path per EV from :func:`path_table`):

* **uplinks**: a switch's ports whose far end is a switch of a higher tier, in port order; an
  uplink's *index* is its position there.
* **EV layout** (:func:`ev_layout`): per tier whose switches choose among several uplinks, a
  field just wide enough for the most uplinks any switch of that tier has. Fields are packed
  from the UDP source port's least significant bit (EV bit 16) upward, tier 0 first, so they
  exist over IPv4 too (whose EV is the source port alone), and at most 14 bits wide in all, so
  an EV keeps the source port's top two bits free (the agent's EVs stay in 49152-65535).
* **steering**: a switch steers packets toward a destination edge switch by its field when
  every uplink it has, and nothing else, lies on a shortest path there (the way up a Clos). A
  field value ``v`` takes uplink ``v mod n``; any other next hop is toward a single neighbour
  (the way down), or hashed.
* **uSIDs**: a switch's uSID is its device id (1-65535; 0 is End-of-Carrier); each plane has
  its own /32 block, ``fcbb:bb<plane>::/32`` (plane in two hex digits), so the outer
  destination also says which fabric the packet is in. A carrier lists every switch of the
  path, the first (source edge) switch included, so every hop is the same operation.

Everything here comes from the whole topology, never from link state: MRC's fabric routes
statically, and the endpoints steer around a dead path by retiring the EVs that name it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from ipaddress import IPv6Address, IPv6Network

import networkx as nx

from topologies.graph import fabric_graph
from topologies.model import Switch, Topology
from wire import srv6

#: EV bit where the first structured field starts: the UDP source port's least significant bit.
EV_FIELD_BASE = 16
#: Bits the fields may use in all: the source port's low 14, its top two staying 0b11.
EV_FIELD_BITS = 14
#: The first plane's uSID block; plane p's is this plus p in the block's last byte.
USID_BLOCK_BASE = IPv6Network("fcbb:bb00::/32")


class PathMode(StrEnum):
    """How a sender's EV picks its path through the fabric (module docs)."""

    ECMP = "ecmp"
    STRUCTURED = "structured"
    SRV6 = "srv6"


class PathError(ValueError):
    """The topology cannot give exact paths (too many uplinks, too long a path, a uSID of 0)."""


@dataclass(frozen=True, order=True)
class EvField:
    """The EV bits a tier's switches read: ``width`` bits from EV bit ``shift``."""

    tier: int
    shift: int
    width: int

    @property
    def mask(self) -> int:
        """The field's value mask, applied after shifting the EV right by ``shift``."""
        return (1 << self.width) - 1

    def value_of(self, ev: int) -> int:
        """This field's value in ``ev``."""
        return (ev >> self.shift) & self.mask

    def place(self, ev: int, value: int) -> int:
        """``ev`` with this field set to ``value``."""
        if not 0 <= value <= self.mask:
            raise ValueError(f"tier {self.tier} field holds 0..{self.mask}, not {value}")
        return (ev & ~(self.mask << self.shift)) | (value << self.shift)


@dataclass(frozen=True)
class EvLayout:
    """The structured EV fields of a topology, one per tier that chooses among uplinks."""

    fields: tuple[EvField, ...]

    def field(self, tier: int) -> EvField | None:
        """The field of ``tier``, or None when its switches have at most one uplink."""
        return next((field for field in self.fields if field.tier == tier), None)


@dataclass(frozen=True)
class FabricPath:
    """One exact path from a source edge switch to a destination edge switch of one plane.

    ``ports[i]`` is the port ``switches[i]`` sends the packet out of toward ``switches[i + 1]``
    (the last switch sends it to the host: not part of the path). ``choices`` are the uplink
    indexes taken on the way up, by tier: what the EV's fields hold.
    """

    plane: int
    switches: tuple[str, ...]
    ports: tuple[int, ...]
    choices: tuple[tuple[int, int], ...]
    usids: tuple[int, ...]
    block: IPv6Network

    @property
    def source(self) -> str:
        """The switch the sender's NIC is plugged into."""
        return self.switches[0]

    @property
    def destination(self) -> str:
        """The switch the receiver's NIC is plugged into."""
        return self.switches[-1]

    @property
    def carrier(self) -> IPv6Address:
        """The SRv6 outer destination that takes a packet along this path."""
        return srv6.carrier_address(self.block, self.usids)

    def structured_ev(self, layout: EvLayout, base: int) -> int:
        """``base`` (an EV) with the fields of ``layout`` set to this path's uplink choices."""
        ev = base
        for tier, index in self.choices:
            field = layout.field(tier)
            if field is not None:
                ev = field.place(ev, index)
        return ev


@dataclass(frozen=True)
class PathTable:
    """Every exact path between every two edge switches of a plane (either way round), by
    (source edge, destination edge), in the order of their EV field values."""

    layout: EvLayout
    paths: Mapping[tuple[str, str], tuple[FabricPath, ...]]

    def between(self, source: str, destination: str) -> tuple[FabricPath, ...]:
        """The paths from edge switch ``source`` to edge switch ``destination`` (KeyError if
        they are not edge switches of one plane)."""
        return self.paths[(source, destination)]

    def reverse(self, path: FabricPath) -> FabricPath:
        """The path through the same switches the other way: what answers to ``path``
        (SACKs, NACKs, probes) travel on."""
        return self._by_switches[tuple(reversed(path.switches))]

    @cached_property
    def _by_switches(self) -> dict[tuple[str, ...], FabricPath]:
        return {path.switches: path for paths in self.paths.values() for path in paths}


def usid_block(plane: int) -> IPv6Network:
    """The uSID block of ``plane``."""
    if not 0 <= plane <= 0xFF:
        raise PathError(f"plane {plane} has no uSID block (planes 0-255 have one)")
    return IPv6Network((int(USID_BLOCK_BASE.network_address) + (plane << 96), 32))


def switch_usid(switch: Switch) -> int:
    """The uSID of ``switch``: its device id."""
    if not 0 < switch.device_id <= 0xFFFF:
        raise PathError(f"{switch.name}: device id {switch.device_id} cannot be a uSID (1-65535)")
    return switch.device_id


def uplinks(topology: Topology, switch: Switch) -> tuple[int, ...]:
    """The ports of ``switch`` toward a switch of a higher tier, in port order."""
    ports = []
    for port in topology.switch_ports(switch.name):
        link = topology.link_at(switch.name, port)
        if link is None:
            continue
        far = link.far_end(switch.name).node
        if not topology.is_host(far) and topology.switch(far).tier > switch.tier:
            ports.append(port)
    return tuple(ports)


def ev_layout(topology: Topology) -> EvLayout:
    """The structured EV fields of ``topology`` (module docs); PathError when they do not fit
    in the bits an EV has for them."""
    most: dict[int, int] = {}
    for switch in topology.switches:
        count = len(uplinks(topology, switch))
        most[switch.tier] = max(most.get(switch.tier, 0), count)
    fields = []
    shift = EV_FIELD_BASE
    for tier in sorted(most):
        if most[tier] < 2:
            continue
        width = (most[tier] - 1).bit_length()
        fields.append(EvField(tier, shift, width))
        shift += width
    if shift - EV_FIELD_BASE > EV_FIELD_BITS:
        raise PathError(
            f"{topology.name}: structured EV fields need {shift - EV_FIELD_BASE} bits, "
            f"more than the {EV_FIELD_BITS} an EV has for them"
        )
    return EvLayout(tuple(fields))


def shortest_ports(topology: Topology) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per edge switch, per switch of its plane: the ports on shortest paths toward it, over
    the whole topology (no link is ever down here)."""
    graph = fabric_graph(topology)
    result: dict[str, dict[str, tuple[int, ...]]] = {}
    for edge in edge_switch_names(topology):
        distance = nx.single_source_shortest_path_length(graph, edge)
        toward: dict[str, tuple[int, ...]] = {}
        for node, hops in distance.items():
            if node == edge:
                continue
            toward[node] = tuple(
                sorted(
                    data["ports"][node]
                    for _, neighbour, data in graph.edges(node, data=True)
                    if distance.get(neighbour) == hops - 1
                )
            )
        result[edge] = toward
    return result


def edge_switch_names(topology: Topology) -> tuple[str, ...]:
    """Switches that hosts attach to, in file order."""
    attached = {nic.switch for _, nic in topology.nics()}
    return tuple(switch.name for switch in topology.switches if switch.name in attached)


def steers(topology: Topology, switch: Switch, ports: tuple[int, ...]) -> bool:
    """Whether ``switch`` steers by its EV field toward a destination it reaches over
    ``ports``: they are exactly its uplinks, and there are several."""
    ups = uplinks(topology, switch)
    return len(ups) > 1 and tuple(sorted(ports)) == ups


def neighbour_ports(topology: Topology, switch: Switch) -> dict[str, int]:
    """Per neighbouring switch, the lowest port of ``switch`` toward it (the one a uSID hop
    takes over parallel links)."""
    ports: dict[str, int] = {}
    for port in topology.switch_ports(switch.name):
        link = topology.link_at(switch.name, port)
        if link is None:
            continue
        far = link.far_end(switch.name).node
        if not topology.is_host(far) and far not in ports:
            ports[far] = port
    return ports


def path_table(topology: Topology) -> PathTable:
    """Every exact path between the edge switches of each plane (module docs).

    PathError when a path cannot be named exactly (a switch with several next hops that are
    not its uplinks toward different neighbours) or has more switches than a carrier holds.
    """
    layout = ev_layout(topology)
    toward = shortest_ports(topology)
    edges = [topology.switch(name) for name in edge_switch_names(topology)]
    paths: dict[tuple[str, str], tuple[FabricPath, ...]] = {}
    for source, destination in itertools.product(edges, edges):
        if source.plane != destination.plane:
            continue
        found = _walk(topology, source, destination.name, toward[destination.name], layout)
        paths[(source.name, destination.name)] = tuple(found)
    return PathTable(layout, paths)


def _walk(
    topology: Topology,
    source: Switch,
    destination: str,
    toward: Mapping[str, tuple[int, ...]],
    layout: EvLayout,
) -> list[FabricPath]:
    block = usid_block(source.plane)
    found: list[FabricPath] = []

    def extend(
        switch: Switch,
        switches: tuple[str, ...],
        ports: tuple[int, ...],
        choices: tuple[tuple[int, int], ...],
    ) -> None:
        if switch.name == destination:
            usids = tuple(switch_usid(topology.switch(name)) for name in switches)
            if len(usids) > srv6.MAX_USIDS:
                raise PathError(
                    f"{' -> '.join(switches)}: {len(usids)} switches, more than the "
                    f"{srv6.MAX_USIDS} uSIDs a carrier holds"
                )
            found.append(FabricPath(source.plane, switches, ports, choices, usids, block))
            return
        next_ports = toward.get(switch.name, ())
        if not next_ports:
            raise PathError(f"{switch.name} has no path to {destination}")
        if steers(topology, switch, next_ports) and layout.field(switch.tier) is not None:
            options = [
                (port, (*choices, (switch.tier, index))) for index, port in enumerate(next_ports)
            ]
        else:
            neighbours = {_far(topology, switch, port) for port in next_ports}
            if len(neighbours) != 1:
                raise PathError(
                    f"{switch.name} reaches {destination} through {sorted(neighbours)}, "
                    "which no EV field chooses between"
                )
            options = [(min(next_ports), choices)]
        for port, taken in options:
            far = topology.switch(_far(topology, switch, port))
            extend(far, (*switches, far.name), (*ports, port), taken)

    extend(source, (source.name,), (), ())
    return found


def _far(topology: Topology, switch: Switch, port: int) -> str:
    link = topology.link_at(switch.name, port)
    if link is None:  # shortest_ports only lists ports with a link
        raise AssertionError(f"{switch.name} port {port} has no link")
    return link.far_end(switch.name).node
