"""Switch counters from the controller's status (``mrc-controller status --json``): which
uplink a flow uses and how loaded each switch-to-switch link is, both from the next-hop
(action-profile member) counters; and how often the switches trimmed and marked ECN, from
the port counters.

Counters only grow (a restarted switch aside), so every figure is a difference between two
snapshots taken around the traffic of interest. A target says what it cannot count (the
status's ``not_counted``, one "name: reason" sentence each: the linux target has no
per-member counters, no trims); such a counter is unavailable, never read as zero.
"""

from __future__ import annotations

from typing import Any

from topologies.model import Topology


class CountersUnavailable(LookupError):
    """The controller could not read a switch's counters for this snapshot (it reports an
    error instead, e.g. a read that timed out on a loaded machine)."""


def member_packets(status: dict[str, Any], switch: str) -> dict[int, int]:
    """Packets per egress port of ``switch``'s next-hop members (member index -> its port);
    CountersUnavailable when the snapshot has none for ``switch``."""
    switch_counters = status["counters"].get(switch)
    if not isinstance(switch_counters, dict) or "members" not in switch_counters:
        reason = (switch_counters or {}).get("error", "not read")
        raise CountersUnavailable(f"{switch}: counters unavailable ({reason})")
    uncounted = not_counted(switch_counters).get("members")
    if uncounted is not None:
        raise CountersUnavailable(f"{switch}: counters unavailable ({uncounted})")
    ports = {
        member["member_index"]: member["port"]
        for group in status["groups"].get(switch, [])
        for member in group["members"]
    }
    counted = switch_counters["members"]
    packets: dict[int, int] = {}
    for index, port in ports.items():
        cell = counted.get(str(index))
        if cell is not None:
            packets[port] = packets.get(port, 0) + int(cell["packets"])
    return packets


def busiest_uplink(
    topology: Topology, switch: str, before: dict[str, Any], after: dict[str, Any]
) -> tuple[str, int, int]:
    """The switch-to-switch port of ``switch`` whose members forwarded the most packets
    between two status snapshots: (peer switch, port, packets)."""
    start, end = member_packets(before, switch), member_packets(after, switch)
    peers = _switch_peers(topology, switch)
    counts = {port: end.get(port, 0) - start.get(port, 0) for port in peers}
    if not counts:
        raise ValueError(f"{switch} has no switch-to-switch links")
    port = max(counts, key=lambda p: counts[p])
    return peers[port], port, counts[port]


def link_loads(
    topology: Topology, before: dict[str, Any], after: dict[str, Any]
) -> dict[str, int | None]:
    """Packets each switch-to-switch link carried between two snapshots, both directions,
    keyed by the link's id (None where an end's counters could not be read): what the
    next-hop members at its two ends forwarded onto it. Member counters, not port counters:
    those also count the controller's LLDP probes, which on a slow link would hide the
    traffic being measured. Members count at ingress, so packets a full queue then drops
    are included: this is the load offered to the link."""
    loads: dict[str, int | None] = {}
    for link in topology.links:
        total: int | None = 0
        for end in (link.a, link.b):
            try:
                start = member_packets(before, end.node).get(end.port, 0)
                stop = member_packets(after, end.node).get(end.port, 0)
            except CountersUnavailable:
                total = None
                break
            assert total is not None
            total += stop - start
        loads[str(link.id)] = total
    return loads


#: The port counters that count the fabric's congestion signals.
SIGNAL_COUNTERS = ("trims", "ecn_marks")


def congestion_signals(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int | None]:
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


def _port_counters(status: dict[str, Any], switch: str) -> dict[str, dict[str, Any]]:
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
