"""Switch counters from the controller's status (``mrc-controller status --json``): which
uplink a flow uses and how loaded each switch-to-switch link is, from what each switch
forwarded out of each port; and how often the switches trimmed and marked ECN, from the
port counters.

What a switch forwarded out of a port is read from its next-hop (action-profile member)
counters where the target keeps them (``bmv2``), and from the port's transmit counter where
it does not (``linux``: a member is a port, so the port's tx packets give the same answer).
Members are preferred because BMv2's port counters also count the controller's LLDP probes,
which on a slow link would hide the traffic being measured; the linux target sends none
(it watches carrier). In the exact path modes (structured EV, SRv6: the status's
``path_mode``) ports are read instead: there a switch sends much of the traffic by its
structured or uSID tables, past the members, which would then count only what is hashed.
The two differ in one respect, said wherever a figure is reported: members count at ingress,
so packets a full queue then drops are included (the load offered to the link); a port's tx
counter counts what the link carried.

Counters only grow (a restarted switch aside), so every figure is a difference between two
snapshots taken around the traffic of interest. A target says what it cannot count (the
status's ``not_counted``, one "name: reason" sentence each: the linux target has no
per-member counters, no trims); such a counter is unavailable, never read as zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from experiments.documents import Status
from topologies.model import Topology

#: The source of per-port forwarded packets: next-hop member counters (counted at ingress).
MEMBER_COUNTERS = "members"
#: The source of per-port forwarded packets: the ports' transmit counters.
PORT_TX_COUNTERS = "port_tx"


class CountersUnavailable(LookupError):
    """The controller could not read a switch's counters for this snapshot (it reports an
    error instead, e.g. a read that timed out on a loaded machine), or the target counts
    neither members nor ports."""


@dataclass(frozen=True)
class Forwarded:
    """Packets one switch forwarded out of each of its ports (port -> packets), which
    counters say so (``MEMBER_COUNTERS`` or ``PORT_TX_COUNTERS``), and the bytes of those
    packets (port -> bytes; None when the snapshot carried no byte counts)."""

    packets: dict[int, int]
    source: str
    byte_counts: dict[int, int] | None = None


class Uplink(NamedTuple):
    """The switch-to-switch port a switch forwarded most packets out of between two
    snapshots, and the counters that told."""

    peer: str
    port: int
    packets: int
    source: str


@dataclass(frozen=True)
class LinkLoads:
    """Packets each switch-to-switch link carried between two snapshots (link id -> packets,
    None where an end's counters could not be read), and the counter sources that were read
    (sorted; empty when none was)."""

    packets: dict[str, int | None]
    sources: tuple[str, ...]


def forwarded_packets(status: Status, switch: str) -> Forwarded:
    """What ``switch`` forwarded out of each port, from its member counters where its target
    keeps them (in ECMP mode) and from its ports' tx counters otherwise;
    CountersUnavailable when the snapshot has neither for ``switch``."""
    switch_counters = status["counters"].get(switch)
    if not isinstance(switch_counters, dict) or "error" in switch_counters:
        reason = (switch_counters or {}).get("error", "not read")
        raise CountersUnavailable(f"{switch}: counters unavailable ({reason})")
    uncounted = not_counted(switch_counters)
    exact = status.get("path_mode", "ecmp") != "ecmp"
    if "members" not in uncounted and not (exact and _has_port_tx(switch_counters, uncounted)):
        if "members" not in switch_counters:
            raise CountersUnavailable(f"{switch}: counters unavailable (no member counters read)")
        packets, byte_counts = _member_packets(status, switch)
        return Forwarded(packets, MEMBER_COUNTERS, byte_counts)
    if "tx_packets" in uncounted or "ports" not in switch_counters:
        raise CountersUnavailable(
            f"{switch}: counters unavailable ({uncounted['members']}; no port tx counters)"
        )
    ports: dict[str, dict[str, Any]] = switch_counters["ports"]
    counted_bytes = "tx_bytes" not in uncounted and all("tx_bytes" in c for c in ports.values())
    return Forwarded(
        {int(port): int(cell["tx_packets"]) for port, cell in ports.items()},
        PORT_TX_COUNTERS,
        {int(port): int(cell["tx_bytes"]) for port, cell in ports.items()}
        if counted_bytes
        else None,
    )


def forwarded_between(before: Status, after: Status, switch: str) -> Forwarded:
    """What ``switch`` forwarded out of each port between two snapshots. Both must come from
    the same counters (a difference of a member count and a port count means nothing)."""
    start, end = forwarded_packets(before, switch), forwarded_packets(after, switch)
    if start.source != end.source:
        raise CountersUnavailable(
            f"{switch}: counters unavailable (read from {start.source} before and "
            f"{end.source} after)"
        )
    ports = start.packets.keys() | end.packets.keys()
    if any(end.packets.get(port, 0) < start.packets.get(port, 0) for port in ports):
        # Counters only grow while a switch lives: one that fell was restarted in between.
        raise CountersUnavailable(
            f"{switch}: counters unavailable (they fell between the snapshots: restarted)"
        )
    byte_counts = None
    if start.byte_counts is not None and end.byte_counts is not None:
        byte_counts = {
            port: end.byte_counts.get(port, 0) - start.byte_counts.get(port, 0) for port in ports
        }
    return Forwarded(
        {port: end.packets.get(port, 0) - start.packets.get(port, 0) for port in ports},
        end.source,
        byte_counts,
    )


def _has_port_tx(switch_counters: dict[str, Any], uncounted: dict[str, str]) -> bool:
    return "tx_packets" not in uncounted and "ports" in switch_counters


def _member_packets(status: Status, switch: str) -> tuple[dict[int, int], dict[int, int] | None]:
    """Packets and bytes per egress port of ``switch``'s next-hop members (member index ->
    its port); bytes None when a member's cell carries no byte count."""
    ports = {
        member["member_index"]: member["port"]
        for group in status["groups"].get(switch, [])
        for member in group["members"]
    }
    counted = status["counters"][switch]["members"]
    packets: dict[int, int] = {}
    byte_counts: dict[int, int] | None = {}
    for index, port in ports.items():
        cell = counted.get(str(index))
        if cell is not None:
            packets[port] = packets.get(port, 0) + int(cell["packets"])
            if byte_counts is not None and "bytes" in cell:
                byte_counts[port] = byte_counts.get(port, 0) + int(cell["bytes"])
            else:
                byte_counts = None
    return packets, byte_counts


def busiest_uplink(topology: Topology, switch: str, before: Status, after: Status) -> Uplink:
    """The switch-to-switch port ``switch`` forwarded the most packets out of between two
    status snapshots."""
    forwarded = forwarded_between(before, after, switch)
    peers = _switch_peers(topology, switch)
    if not peers:
        raise ValueError(f"{switch} has no switch-to-switch links")
    counts = {port: forwarded.packets.get(port, 0) for port in peers}
    port = max(counts, key=lambda p: counts[p])
    return Uplink(peers[port], port, counts[port], forwarded.source)


def link_loads(topology: Topology, before: Status, after: Status) -> LinkLoads:
    """Packets each switch-to-switch link carried between two snapshots, both directions:
    what the switches at its two ends forwarded onto it (see the module's docstring for
    what member and port counters each include)."""
    loads: dict[str, int | None] = {}
    sources: set[str] = set()
    forwarded: dict[str, Forwarded | None] = {}
    for link in topology.links:
        total: int | None = 0
        for end in (link.a, link.b):
            if end.node not in forwarded:
                try:
                    forwarded[end.node] = forwarded_between(before, after, end.node)
                except CountersUnavailable:
                    forwarded[end.node] = None
            counted = forwarded[end.node]
            if counted is None or total is None:
                total = None
                continue
            sources.add(counted.source)
            total += counted.packets.get(end.port, 0)
        loads[str(link.id)] = total
    return LinkLoads(loads, tuple(sorted(sources)))


@dataclass(frozen=True)
class HopLoad:
    """What one switch forwarded onto one switch-to-switch link, in one direction, between
    two snapshots: packets, their bytes (None where not counted), and the counters read."""

    link: str
    source: str
    packets: int
    byte_count: int | None


def hop_loads(topology: Topology, before: Status, after: Status) -> dict[str, HopLoad | None]:
    """Each direction of each switch-to-switch link (``"l1:3->s1"``: out of l1's port 3
    toward s1) with what its sending switch forwarded onto it between two snapshots; None
    where that switch's counters could not be read."""
    forwarded: dict[str, Forwarded | None] = {}
    loads: dict[str, HopLoad | None] = {}
    for link in topology.links:
        for end, far in ((link.a, link.b), (link.b, link.a)):
            if end.node not in forwarded:
                try:
                    forwarded[end.node] = forwarded_between(before, after, end.node)
                except CountersUnavailable:
                    forwarded[end.node] = None
            counted = forwarded[end.node]
            name = f"{end.node}:{end.port}->{far.node}"
            if counted is None:
                loads[name] = None
                continue
            loads[name] = HopLoad(
                str(link.id),
                counted.source,
                counted.packets.get(end.port, 0),
                None if counted.byte_counts is None else counted.byte_counts.get(end.port, 0),
            )
    return loads


#: The port counters that count the fabric's congestion signals.
SIGNAL_COUNTERS = ("trims", "ecn_marks")


def congestion_signals(before: Status, after: Status) -> dict[str, int | None]:
    """Packets trimmed and packets ECN-marked by every switch between two snapshots, summed
    over all ports; None for a counter some switch does not count, and for both when some
    switch's counters could not be read in either snapshot."""
    totals: dict[str, int | None] = dict.fromkeys(SIGNAL_COUNTERS, 0)
    for switch in after["counters"]:
        try:
            start, stop = (_port_counters(status, switch) for status in (before, after))
        except CountersUnavailable:
            return dict.fromkeys(SIGNAL_COUNTERS, None)
        uncounted = not_counted(after["counters"][switch])
        for name in SIGNAL_COUNTERS:
            total = totals[name]
            if total is None or name in uncounted:
                totals[name] = None
                continue
            totals[name] = total + sum(
                int(cell[name]) - int(start.get(port, {}).get(name, 0))
                for port, cell in stop.items()
            )
    return totals


def not_counted(switch_counters: dict[str, Any]) -> dict[str, str]:
    """What a switch's target says it cannot count: counter name -> the target's sentence."""
    notes = switch_counters.get("not_counted", ())
    return {note.split(":", 1)[0].strip(): note for note in notes}


def _port_counters(status: Status, switch: str) -> dict[str, dict[str, Any]]:
    switch_counters = status["counters"].get(switch)
    if not isinstance(switch_counters, dict) or "ports" not in switch_counters:
        reason = (switch_counters or {}).get("error", "not read")
        raise CountersUnavailable(f"{switch}: counters unavailable ({reason})")
    ports: dict[str, dict[str, Any]] = switch_counters["ports"]
    return ports


def _switch_peers(topology: Topology, switch: str) -> dict[int, str]:
    peers = {}
    for link in topology.links:
        if link.a.node == switch:
            peers[link.a.port] = link.b.node
        elif link.b.node == switch:
            peers[link.b.port] = link.a.node
    return peers
