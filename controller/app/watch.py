"""What a status subscription shows, kept as one model: ``mrc-controller watch`` prints it, the
testbed's live page draws it.

The stream (``controller.app.status_socket``) carries events as they happen and a full status
every period. ``FabricWatch.apply`` folds each message in: link states follow the
``link_down``/``link_up`` events at once (the page shows a cut before the next status arrives)
and each status's link table; link loads are byte-counter differences between two
consecutive statuses, per direction, from the sending switch's port ``tx`` or, where the
sender is a host, the receiving switch's port ``rx``. A counter that went backwards (a switch
restarted empty) gives no load for that period rather than a negative one.
"""

from __future__ import annotations

import contextlib
from collections import deque
from datetime import datetime
from typing import Any

from topologies.model import Topology

#: How many events the model keeps (the page lists the newest).
EVENTS_KEPT = 200
#: Events that say something about the fabric's state; the rest (program results, probe
#: warnings) are shown by ``watch --all`` and kept in the model all the same.
NOTABLE_EVENTS = frozenset(
    {
        "link_down",
        "link_up",
        "failover",
        "intent_changed",
        "switch_connected",
        "switch_disconnected",
        "switch_in_service",
        "port_status",
        "unlisted_link",
        "write_failed",
        "internal_error",
        "controller_stopped",
    }
)


def describe_topology(topology: Topology) -> dict[str, Any]:
    """The fabric as plain data for a subscriber: planes, switches with their tier, hosts with
    their NICs, and every link (switch links, then host links) by the id the status uses."""
    return {
        "name": topology.name,
        "planes": [{"id": plane.id, "name": plane.name} for plane in topology.planes],
        "switches": [
            {"name": s.name, "role": str(s.role), "tier": s.tier, "plane": s.plane}
            for s in topology.switches
        ],
        "hosts": [
            {
                "name": host.name,
                "nics": [
                    {
                        "index": nic.index,
                        "plane": nic.plane,
                        "switch": nic.switch,
                        "port": nic.switch_port,
                        "ipv4": str(nic.ipv4.ip),
                    }
                    for nic in host.nics
                ],
            }
            for host in topology.hosts
        ],
        "links": [
            {
                "id": str(link.id),
                "a": str(link.id.a),
                "b": str(link.id.b),
                "kind": "host" if link in topology.host_links else "fabric",
            }
            for link in topology.all_links
        ],
    }


class FabricWatch:
    """The latest view of a running controller, built from its subscription's messages."""

    def __init__(self, events_kept: int = EVENTS_KEPT) -> None:
        self.topology: dict[str, Any] | None = None
        self.period_s: float | None = None
        self.status: dict[str, Any] | None = None
        self.status_error: str | None = None
        self.events: deque[dict[str, Any]] = deque(maxlen=events_kept)
        #: Link id -> {"state": up|down|untracked, "changed_at": ISO time or None,
        #: "ab_bps"/"ba_bps": load from end a to end b and back, None when not measured}.
        self.links: dict[str, dict[str, Any]] = {}
        #: Link id -> its two ends ("node:port"), as the topology names them.
        self.ends: dict[str, tuple[str, str]] = {}
        self._switches: set[str] = set()
        self._previous: tuple[float, dict[str, Any]] | None = None

    def apply(self, message: dict[str, Any]) -> str:
        """Fold one subscription message in; returns its kind (unknown kinds change nothing)."""
        kind = str(message.get("kind"))
        if kind == "subscribed":
            self._subscribed(message)
        elif kind == "event" and isinstance(message.get("event"), dict):
            self._event(message["event"])
        elif kind == "status" and isinstance(message.get("status"), dict):
            self._status(message["status"])
        elif kind == "status_error":
            self.status_error = str(message.get("error"))
        return kind

    def _subscribed(self, message: dict[str, Any]) -> None:
        topology = message.get("topology")
        self.period_s = message.get("period_s")
        if isinstance(topology, dict):
            self.set_topology(topology)

    def set_topology(self, topology: dict[str, Any]) -> None:
        """Start over with the fabric ``topology`` (``describe_topology``); every link's state
        unknown ("untracked") until the controller says."""
        self.topology = topology
        self._switches = {s["name"] for s in topology.get("switches", [])}
        self.ends = {link["id"]: (link["a"], link["b"]) for link in topology.get("links", [])}
        self.links = {
            link_id: {"state": "untracked", "changed_at": None, "ab_bps": None, "ba_bps": None}
            for link_id in self.ends
        }
        self._previous = None

    def _event(self, record: dict[str, Any]) -> None:
        self.events.append(record)
        name = record.get("event")
        if name in ("link_down", "link_up"):
            link = self.links.get(str(record.get("link")))
            if link is not None:
                link["state"] = "down" if name == "link_down" else "up"
                link["changed_at"] = record.get("ts")

    def _status(self, status: dict[str, Any]) -> None:
        self.status = status
        self.status_error = None
        for entry in status.get("links", []):
            link = self.links.get(str(entry.get("link")))
            if link is not None:
                link["state"] = str(entry.get("state"))
                link["changed_at"] = entry.get("changed_at")
        uptime = status.get("uptime_s")
        counters = status.get("counters")
        if not isinstance(uptime, int | float) or not isinstance(counters, dict):
            return
        if self._previous is not None:
            self._loads(uptime - self._previous[0], self._previous[1], counters)
        self._previous = (float(uptime), counters)

    def _loads(self, seconds: float, before: dict[str, Any], after: dict[str, Any]) -> None:
        for link_id, (a, b) in self.ends.items():
            link = self.links[link_id]
            if seconds <= 0:
                link["ab_bps"] = link["ba_bps"] = None
                continue
            link["ab_bps"] = self._direction_bps(a, b, seconds, before, after)
            link["ba_bps"] = self._direction_bps(b, a, seconds, before, after)

    def _direction_bps(
        self,
        sender: str,
        receiver: str,
        seconds: float,
        before: dict[str, Any],
        after: dict[str, Any],
    ) -> float | None:
        """Bits per second from end ``sender`` to end ``receiver`` ("node:port" each)."""
        for end, field in ((sender, "tx_bytes"), (receiver, "rx_bytes")):
            node, _, port = end.rpartition(":")
            if node not in self._switches:
                continue
            old = _port_counter(before, node, port, field)
            new = _port_counter(after, node, port, field)
            if old is None or new is None or new < old:
                continue
            return (new - old) * 8 / seconds
        return None

    def down_links(self) -> list[str]:
        """Links whose state is down, sorted."""
        return sorted(link_id for link_id, link in self.links.items() if link["state"] == "down")

    def to_json(self, events: int = 50) -> dict[str, Any]:
        """The model for the page: links with state and load, switches, the newest events."""
        status = self.status or {}
        return {
            "topology": None if self.topology is None else self.topology.get("name"),
            "generation": status.get("generation"),
            "uptime_s": status.get("uptime_s"),
            "routing": status.get("routing"),
            "switches": status.get("switches", {}),
            "links": self.links,
            "last_failover": status.get("last_failover"),
            "not_counted": _not_counted(status),
            "status_error": self.status_error,
            "events": list(self.events)[-events:],
        }


def _port_counter(counters: dict[str, Any], switch: str, port: str, field: str) -> int | None:
    value: Any = counters
    for key in (switch, "ports", port, field):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _not_counted(status: dict[str, Any]) -> list[str]:
    """What the target does not count, once (every switch of a target says the same)."""
    seen: list[str] = []
    switches = status.get("counters")
    for counters in switches.values() if isinstance(switches, dict) else ():
        notes = counters.get("not_counted") if isinstance(counters, dict) else None
        for note in notes if isinstance(notes, list) else ():
            if note not in seen:
                seen.append(note)
    return seen


def format_event(record: dict[str, Any]) -> str:
    """One event as a terminal line: its time of day, name and fields."""
    when = str(record.get("ts", ""))
    with contextlib.suppress(ValueError):
        when = datetime.fromisoformat(when).strftime("%H:%M:%S.%f")[:-3]
    fields = " ".join(
        f"{key}={value}" for key, value in record.items() if key not in ("ts", "mono", "event")
    )
    return f"{when} {record.get('event')} {fields}".rstrip()


def format_period(watch: FabricWatch, busiest: int = 3) -> str:
    """One line per status: link counts by state and the busiest link directions."""
    states: dict[str, int] = {}
    loads: list[tuple[float, str]] = []
    for link_id, link in watch.links.items():
        states[link["state"]] = states.get(link["state"], 0) + 1
        a, b = watch.ends[link_id]
        for bps, arrow in ((link["ab_bps"], f"{a}->{b}"), (link["ba_bps"], f"{b}->{a}")):
            if bps:
                loads.append((bps, arrow))
    counts = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
    top = ", ".join(f"{arrow} {bps / 1e6:.2f} Mb/s" for bps, arrow in sorted(loads)[::-1][:busiest])
    generation = (watch.status or {}).get("generation")
    line = f"generation {generation}  links: {counts or 'none'}"
    down = watch.down_links()
    if down:
        line += f"  down: {' '.join(down)}"
    return line + (f"  busiest: {top}" if top else "")
