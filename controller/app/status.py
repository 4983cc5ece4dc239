"""What ``mrc-controller status`` shows: the running controller's state as JSON, and as text.

The routing policy, links and their state, the groups every switch hashes over and their
members, per-port and per-member counters read from the switches at the moment of the request,
and the last failover with its duration. Times are shown as UTC wall-clock timestamps.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from controller.app.clock import wall_time_of
from controller.app.fabric import FabricController
from controller.southbound.interface import SouthboundError, SwitchCounters

COUNTERS_TIMEOUT_S = 2.0


async def collect_status(fabric: FabricController) -> dict[str, Any]:
    """A JSON-ready snapshot of ``fabric``, counters included."""
    clock = fabric.clock

    def when(monotonic_at: float | None) -> str | None:
        if monotonic_at is None:
            return None
        return _iso(wall_time_of(clock, monotonic_at))

    switches = {
        name: {
            "role": str(view.role) if view.role is not None else "disconnected",
            "in_service": view.in_service,
            "last_program": None
            if view.last_result is None
            else {
                "ok": view.last_result.ok,
                "read_back": view.last_result.read_back,
                "writes": view.last_result.writes,
                "error": view.last_result.error,
            },
        }
        for name, view in fabric.views.items()
    }
    links = [
        {"link": str(link), "state": str(status.state), "changed_at": when(status.changed_at)}
        for link, status in sorted(fabric.link_status().items())
    ]
    unlisted = [
        {
            "sender": str(seen.sender),
            "receiver": str(seen.receiver),
            "first_seen": when(seen.first_seen),
            "last_seen": when(seen.last_seen),
            "probes": seen.probes,
        }
        for seen in fabric.probes.unlisted_links.values()
    ]
    groups = {
        intent.switch: [
            {
                "group_id": group.group_id,
                "members": [
                    {
                        "member_index": member.member_index,
                        "port": member.egress_port,
                        "watch_port": member.watch_port,
                    }
                    for member in group.members
                ],
            }
            for group in intent.groups
        ]
        for intent in fabric.intent.switches
    }
    failover = fabric.last_failover
    stats = fabric.probes.stats
    return {
        "topology": fabric.topology.name,
        "generation": fabric.generation,
        "uptime_s": round(clock.monotonic() - fabric.started_at, 3),
        "routing": {
            **fabric.routing.to_json(),
            "routed_down_links": sorted(str(link) for link in fabric.routed_down_links()),
            "pending_convergences": fabric.pending_convergences(),
        },
        "path_mode": str(fabric.path_mode),
        "discovery": {
            "enabled": fabric.discovery.enabled,
            "probe_interval_ms": round(fabric.discovery.interval_s * 1000, 3),
            "miss_limit": fabric.discovery.miss_limit,
        },
        "switches": switches,
        "links": links,
        "down_links": sorted(str(link) for link in fabric.down_links()),
        "unlisted_links": unlisted,
        "groups": groups,
        "counters": await _collect_counters(fabric),
        "last_failover": None
        if failover is None
        else {**failover.to_json(), "detected_at": when(failover.detected_at)},
        "probes": {
            "sent": stats.sent,
            "received": stats.received,
            "malformed": stats.malformed,
            "foreign": stats.foreign,
            "other_controller": stats.other_controller,
            "ignored": stats.ignored,
        },
    }


async def _collect_counters(fabric: FabricController) -> dict[str, Any]:
    names = [name for name, view in fabric.views.items() if view.role is not None]
    results = await asyncio.gather(*(_switch_counters(fabric, name) for name in names))
    return dict(zip(names, results, strict=True))


async def _switch_counters(fabric: FabricController, name: str) -> dict[str, Any]:
    ports = fabric.topology.switch_ports(name)
    members = [member.member_index for member in fabric.intent.switch(name).members]
    try:
        counters = await asyncio.wait_for(
            fabric.southbound.read_counters(name, ports, members), COUNTERS_TIMEOUT_S
        )
    except (SouthboundError, TimeoutError) as error:
        return {"error": str(error) or "timed out"}
    return _counters_json(counters)


def _counters_json(counters: SwitchCounters) -> dict[str, Any]:
    return {
        "ports": {
            str(port): {
                "rx_packets": c.rx_packets,
                "rx_bytes": c.rx_bytes,
                "tx_packets": c.tx_packets,
                "tx_bytes": c.tx_bytes,
                "drops": c.drops,
                "trims": c.trims,
                "ecn_marks": c.ecn_marks,
            }
            for port, c in sorted(counters.ports.items())
        },
        "members": {
            str(index): {"packets": c.packets, "bytes": c.bytes}
            for index, c in sorted(counters.members.items())
        },
        "not_counted": list(counters.not_counted),
    }


def format_status(status: dict[str, Any]) -> str:
    """The snapshot as text for a terminal."""
    lines = [
        f"topology {status['topology']}  generation {status['generation']}  "
        f"uptime {status['uptime_s']:.1f} s",
        _routing_line(status["routing"], status.get("path_mode", "ecmp")),
        "switches:",
    ]
    for name, switch in status["switches"].items():
        program = switch["last_program"]
        last = (
            "never programmed"
            if program is None
            else f"last program: {program['writes']} writes, "
            + ("ok" if program["ok"] else f"FAILED ({program['error'] or 'entity errors'})")
        )
        service = "in service" if switch["in_service"] else "not in service"
        lines.append(f"  {name:<8} {switch['role']:<12} {service:<15} {last}")
    lines.append("links:")
    lines += [f"  {link['link']:<28} {link['state']}" for link in status["links"]]
    for seen in status["unlisted_links"]:
        lines.append(f"  UNLISTED {seen['sender']} -> {seen['receiver']} ({seen['probes']} probes)")
    lines.append("groups:")
    for name, groups in status["groups"].items():
        for group in groups:
            members = " ".join(
                f"port {m['port']} (member {m['member_index']})" for m in group["members"]
            )
            lines.append(f"  {name} group {group['group_id']}: {members}")
    lines.append("counters:")
    for name, counters in status["counters"].items():
        if "error" in counters:
            lines.append(f"  {name}: unavailable ({counters['error']})")
            continue
        for port, c in counters["ports"].items():
            lines.append(
                f"  {name} port {port}: rx {c['rx_packets']} pkts {c['rx_bytes']} B, "
                f"tx {c['tx_packets']} pkts {c['tx_bytes']} B, drops {c['drops']}, "
                f"trims {c['trims']}, ecn {c['ecn_marks']}"
            )
        for index, c in counters["members"].items():
            lines.append(f"  {name} member {index}: {c['packets']} pkts {c['bytes']} B")
        for note in counters.get("not_counted", ()):
            lines.append(f"  {name} not counted: {note}")
    failover = status["last_failover"]
    if failover is None:
        lines.append("last failover: none")
    else:
        lines.append(
            f"last failover: {', '.join(failover['trigger'])}: {failover['duration_ms']:.1f} ms "
            f"(detection {failover['detection_ms']:.1f} + programming "
            f"{failover['programming_ms']:.1f}), {failover['writes']} writes on "
            f"{', '.join(failover['switches']) or 'no switch'}, {failover['phase']}"
            + ("" if failover["complete"] else " INCOMPLETE")
        )
    return "\n".join(lines)


def _routing_line(routing: dict[str, Any], path_mode: str) -> str:
    """The routing policy, the path mode unless ECMP, and which down links the fabric-wide
    routes avoid so far."""
    line = f"routing: {routing['policy']}"
    if path_mode != "ecmp":
        line += f", paths: {path_mode}"
    routed = routing["routed_down_links"]
    if routed:
        line += f", routes avoid {', '.join(routed)}"
    if routing["pending_convergences"]:
        line += f", {routing['pending_convergences']} recomputation(s) pending"
    return line


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, tz=UTC).isoformat()
