"""Where the live page draws each node: switches in rows by tier, hosts under their leaves,
planes apart.

Why computed here rather than by a force layout in the browser: a fabric is a layered graph
whose layers mean something (tier 0 where hosts attach, spines or aggregation above, cores on
top), and a reader finds a link by its tiers; a force layout scatters a fat-tree of k=8 into a
ball. Rows are ordered to keep links short: leaves by name, each higher tier by the mean
position of its neighbours below (a fat-tree's aggregation switches then sit over their pod),
hosts two abreast under the leaf of their first NIC.

With two or more planes, even planes grow upwards from the hosts and odd planes downwards, so
a host sits between its leaves of planes 0 and 1; planes 2 and 3 go beside those, and so on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topologies.model import Topology

#: Centre-to-centre distances, in the page's pixels at zoom 1.
SWITCH_SPACING = 100.0
ROW_SPACING = 120.0
HOST_COLUMN_OFFSET = 28.0
HOST_ROW_SPACING = 44.0
PLANE_GAP = 160.0
#: The widest a node is drawn (the page's style uses the same).
NODE_SIZE = 30.0


@dataclass(frozen=True)
class Position:
    """A node's centre; ``row`` names its row for the page's labels (``plane 0 tier 1``)."""

    x: float
    y: float
    row: str


def natural_key(name: str) -> tuple[object, ...]:
    """``s2`` before ``s10``: digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def layout(topology: Topology) -> dict[str, Position]:
    """A position for every switch and host of ``topology``."""
    neighbours: dict[str, set[str]] = {}
    for link in topology.links:
        neighbours.setdefault(link.a.node, set()).add(link.b.node)
        neighbours.setdefault(link.b.node, set()).add(link.a.node)
    hosts_of: dict[str, list[str]] = {}
    for host in topology.hosts:
        if host.nics:
            hosts_of.setdefault(host.nics[0].switch, []).append(host.name)
    host_rows = max((_host_rows(len(names)) for names in hosts_of.values()), default=0)
    host_band = max(host_rows - 1, 0) * HOST_ROW_SPACING

    positions: dict[str, Position] = {}
    plane_ids = sorted({switch.plane for switch in topology.switches})
    widths = {plane: _plane_width(topology, plane) for plane in plane_ids}
    offsets: dict[int, float] = {}
    for index, plane in enumerate(plane_ids):
        column = index // 2
        if index % 2 == 0:
            offsets[plane] = sum(
                max(widths[p] for p in plane_ids[2 * c : 2 * c + 2]) + PLANE_GAP
                for c in range(column)
            )
        else:
            offsets[plane] = offsets[plane_ids[index - 1]]
    for index, plane in enumerate(plane_ids):
        upward = index % 2 == 0
        positions.update(
            _plane_positions(topology, plane, offsets[plane], upward, host_band, neighbours)
        )
    for leaf, names in hosts_of.items():
        if leaf not in positions:
            continue
        centre = positions[leaf].x
        for order, name in enumerate(sorted(names, key=natural_key)):
            column = -1 if order % 2 == 0 else 1
            if len(names) == 1:
                column = 0
            positions[name] = Position(
                centre + column * HOST_COLUMN_OFFSET,
                (order // 2) * HOST_ROW_SPACING,
                "hosts",
            )
    return positions


def _host_rows(count: int) -> int:
    return (count + 1) // 2


def _plane_width(topology: Topology, plane: int) -> float:
    per_tier: dict[int, int] = {}
    for switch in topology.switches:
        if switch.plane == plane:
            per_tier[switch.tier] = per_tier.get(switch.tier, 0) + 1
    return max(per_tier.values(), default=1) * SWITCH_SPACING


def _plane_positions(
    topology: Topology,
    plane: int,
    offset: float,
    upward: bool,
    host_band: float,
    neighbours: dict[str, set[str]],
) -> dict[str, Position]:
    tiers: dict[int, list[str]] = {}
    for switch in topology.switches:
        if switch.plane == plane:
            tiers.setdefault(switch.tier, []).append(switch.name)
    width = _plane_width(topology, plane)
    positions: dict[str, Position] = {}
    for rank, tier in enumerate(sorted(tiers)):
        names = tiers[tier]
        if rank == 0:
            ordered = sorted(names, key=natural_key)
        else:

            def barycentre(name: str) -> float:
                below = [positions[n].x for n in neighbours.get(name, ()) if n in positions]
                return sum(below) / len(below) if below else 0.0

            ordered = sorted(names, key=lambda n: (barycentre(n), natural_key(n)))
        spacing = width / len(ordered)
        distance = ROW_SPACING * (rank + 1)
        y = -distance if upward else host_band + distance
        for index, name in enumerate(ordered):
            positions[name] = Position(
                offset + spacing * (index + 0.5), y, f"plane {plane} tier {tier}"
            )
    return positions
