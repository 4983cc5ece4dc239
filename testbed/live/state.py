"""What the live page shows, as one JSON-ready model fed by the page server's sources.

The controller's half is ``controller.app.watch.FabricWatch`` (the model ``mrc-controller
watch`` prints), fed the status subscription's messages; this adds what only the testbed
knows (which links it has cut, which transfers the page started) and the agents' half: each
host agent's ``status`` (with EV tables), polled once per refresh.

A sender-side connection (one that has sent data) is a transfer on the page: its goodput is
the growth of ``bytes_acked`` between two polls, its EV grid the agent's EV table. It stays
listed for ``FINISHED_KEPT_S`` after its counters stop moving, so the end of a short
transfer can still be read.

A collective job (the testbed's ``JobBoard`` snapshot, ``testbed.jobs``) groups the
connections of its ranks, which it names by host and QP number: the job's goodput is the sum
of theirs, its history the sum of their histories (one sample per poll, aligned on the
newest). A job is shown while it runs and ``JOB_KEPT_S`` after it ended.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.app.watch import FabricWatch, describe_topology
from testbed.live.layout import layout
from testbed.live.paths import Flow, host_of
from topologies.model import Topology

#: Seconds a connection whose counters stopped moving is still listed.
FINISHED_KEPT_S = 30.0
#: Goodput samples kept per connection (one per poll) for the page's sparkline.
HISTORY = 60
#: Controller events sent with each update (the page lists the newest).
EVENTS_SHOWN = 40
#: Seconds an ended collective job is still shown.
JOB_KEPT_S = 60.0
#: The EV states in the order of their codes in an update's compact EV rows.
EV_STATES = ("GOOD", "SKIP", "ASSUMED_BAD", "DENIED")
#: Longest error text the page shows (an agent's or an operation's failure).
ERROR_TEXT_CHARS = 300


@dataclass
class _Connection:
    host: str
    qp: int
    first_seen: float
    last_acked: int = 0
    last_polled: float | None = None
    last_moved: float = 0.0
    goodput_bps: float = 0.0
    history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class PageTransfer:
    """A transfer started from the page: its hosts, state, last goodput sample, outcome."""

    id: int
    source: str
    destination: str
    started: float
    state: str = "running"
    goodput_bps: float | None = None
    bytes_sent: int = 0
    error: str | None = None
    summary: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "destination": self.destination,
            "state": self.state,
            "goodput_bps": self.goodput_bps,
            "bytes": self.bytes_sent,
            "error": self.error,
            "summary": self.summary,
        }


class LiveState:
    """The page's model; not thread-safe: the page server's event loop owns it."""

    def __init__(
        self,
        topology: Topology,
        can_restart: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topology = topology
        self.can_restart = can_restart
        self._clock = clock
        self.watch = FabricWatch()
        self.watch.set_topology(describe_topology(topology))
        self.controller_error: str | None = "not connected yet"
        self.cut: frozenset[str] = frozenset()
        self.agents: dict[str, dict[str, Any]] = {
            host.name: {"ok": False, "error": "not polled yet"} for host in topology.hosts
        }
        self._connections: dict[tuple[str, int], _Connection] = {}
        self.transfers: dict[int, PageTransfer] = {}
        self._next_transfer = 1
        self.jobs: list[dict[str, Any]] = []
        #: The run's controllers and what each does (``primary``, ``backup``, ``dead``...).
        self.controllers: dict[str, str] = {}

    # -- the static part ---------------------------------------------------------------------
    def layout_json(self) -> dict[str, Any]:
        """Nodes with their positions and kinds, links with their ends: sent once per page."""
        positions = layout(self.topology)
        description = describe_topology(self.topology)
        nodes = [
            {
                "id": switch["name"],
                "kind": "switch",
                "role": switch["role"],
                "tier": switch["tier"],
                "plane": switch["plane"],
                "x": positions[switch["name"]].x,
                "y": positions[switch["name"]].y,
            }
            for switch in description["switches"]
        ] + [
            {
                "id": host["name"],
                "kind": "host",
                "nics": host["nics"],
                "x": positions[host["name"]].x,
                "y": positions[host["name"]].y,
            }
            for host in description["hosts"]
        ]
        links = [
            {
                "id": link["id"],
                "a": link["a"],
                "b": link["b"],
                "source": link["a"].rpartition(":")[0],
                "target": link["b"].rpartition(":")[0],
                "kind": link["kind"],
            }
            for link in description["links"]
        ]
        return {
            "topology": self.topology.name,
            "planes": description["planes"],
            "nodes": nodes,
            "links": links,
            "can_restart": self.can_restart,
            "ev_states": list(EV_STATES),
        }

    # -- feeding -----------------------------------------------------------------------------
    def apply_controller(self, message: dict[str, Any]) -> bool:
        """Fold a subscription message in; True when it is an event (worth pushing at once)."""
        self.controller_error = None
        return self.watch.apply(message) == "event"

    def controller_lost(self, reason: str) -> None:
        """The subscription failed or ended; the last view stays, marked stale."""
        self.controller_error = reason

    def set_cut(self, links: frozenset[str]) -> None:
        """The links the testbed has cut now (its own record, for host links too)."""
        self.cut = links

    def set_controllers(self, controllers: dict[str, str]) -> None:
        """What each of the run's controllers is doing now (``TestbedActions.controllers``)."""
        self.controllers = controllers

    def set_jobs(self, jobs: list[dict[str, Any]]) -> None:
        """The testbed's collective jobs now (``testbed.jobs.JobBoard.snapshot``)."""
        self.jobs = jobs

    def apply_agent(self, host: str, status: dict[str, Any]) -> None:
        """One poll's ``status`` (with EV tables) of ``host``'s agent."""
        now = self._clock()
        self.agents[host] = {"ok": True, "error": None, "planes": status.get("planes", [])}
        for stats in status.get("connections", []):
            if not isinstance(stats, dict) or not isinstance(stats.get("qp"), int):
                continue
            if not stats.get("data_packets_sent"):
                continue  # a receiving half: its sender's agent shows the transfer
            self._track(host, stats, now)

    def agent_unavailable(self, host: str, error: str) -> None:
        """A poll of ``host``'s agent failed."""
        self.agents[host] = {"ok": False, "error": error}

    def _track(self, host: str, stats: dict[str, Any], now: float) -> None:
        key = (host, stats["qp"])
        connection = self._connections.get(key)
        acked = stats.get("bytes_acked")
        acked = acked if isinstance(acked, int) else 0
        if connection is None or acked < connection.last_acked:  # new, or the qp was reused
            connection = _Connection(host, stats["qp"], first_seen=now, last_moved=now)
            self._connections[key] = connection
        elif connection.last_polled is not None and now > connection.last_polled:
            connection.goodput_bps = (
                (acked - connection.last_acked) * 8 / (now - connection.last_polled)
            )
            connection.history.append(connection.goodput_bps)
        if acked != connection.last_acked or stats.get("bytes_in_flight"):
            connection.last_moved = now
        connection.last_acked = acked
        connection.last_polled = now
        connection.stats = stats

    def flow_of(self, host: str, qp: int, ev: int) -> Flow:
        """What the packets of ``host``'s connection ``qp`` sent with ``ev`` carry: the
        plane's local address (the agent's ``planes``), the peer's on that plane, the EV's
        ports; ValueError when the last poll does not know them."""
        connection = self._connections.get((host, qp))
        if connection is None:
            raise ValueError(f"no transfer {host}/{qp} is listed")
        rows = connection.stats.get("evs", [])
        row = next((r for r in rows if isinstance(r, dict) and r.get("ev") == ev), None)
        if row is None:
            raise ValueError(f"EV {ev:#x} is not in the EV set of {host}/{qp}")
        plane = row.get("plane", 0)
        local = self.agents.get(host, {}).get("planes", [])
        remote = connection.stats.get("remote_addresses", [])
        if not isinstance(plane, int) or not 0 <= plane < min(len(local), len(remote)):
            raise ValueError(f"the addresses of {host}/{qp} on plane {plane} are not known")
        return Flow.of_ev(local[plane], remote[plane], ev)

    def start_transfer(self, source: str, destination: str) -> PageTransfer:
        """Record a transfer the page asked for (its thread reports progress and the end)."""
        transfer = PageTransfer(self._next_transfer, source, destination, self._clock())
        self.transfers[transfer.id] = transfer
        self._next_transfer += 1
        return transfer

    # -- the dynamic part --------------------------------------------------------------------
    def update_json(self) -> dict[str, Any]:
        """Everything that changes: controller, links, agents, transfers; sent every refresh."""
        now = self._clock()
        for key in [
            key for key, c in self._connections.items() if now - c.last_moved > FINISHED_KEPT_S
        ]:
            del self._connections[key]
        model = self.watch.to_json(events=EVENTS_SHOWN)
        links = {
            link_id: {**link, "cut": link_id in self.cut}
            for link_id, link in model["links"].items()
        }
        return {
            "wall": time.time(),
            "controller": {
                "error": self.controller_error,
                "generation": model["generation"],
                "uptime_s": model["uptime_s"],
                "routing": model["routing"],
                "last_failover": model["last_failover"],
                "not_counted": model["not_counted"],
                "status_error": model["status_error"],
                "controllers": self.controllers,
            },
            "switches": model["switches"],
            "links": links,
            "events": model["events"],
            "agents": self.agents,
            "connections": [
                self._connection_json(c, now)
                for c in sorted(self._connections.values(), key=lambda c: (c.host, c.qp))
            ],
            "transfers": [t.to_json() for t in sorted(self.transfers.values(), key=_newest)][:10],
            "jobs": [self._job_json(job, now) for job in self.jobs if _shown(job)],
        }

    def _job_json(self, job: dict[str, Any], now: float) -> dict[str, Any]:
        """The job with its ranks' listed connections (by key, in rank order) summed up."""
        hosts, qps = job.get("hosts", []), job.get("qps", [])
        members = [
            self._connections[(host, qp)]
            for host, rank_qps in zip(hosts, qps, strict=False)
            for qp in rank_qps
            if (host, qp) in self._connections
        ]
        length = max((len(c.history) for c in members), default=0)
        history = [0.0] * length
        for connection in members:
            offset = length - len(connection.history)
            for index, value in enumerate(connection.history):
                history[offset + index] += value
        active = [c for c in members if now - c.last_moved < 2.5]
        return {
            **job,
            "connections": [f"{c.host}/{c.qp}" for c in members],
            "goodput_bps": sum(c.goodput_bps for c in active),
            "history": history,
            "bytes_acked": sum(c.last_acked for c in members),
        }

    def _connection_json(self, connection: _Connection, now: float) -> dict[str, Any]:
        stats = connection.stats
        evs = [
            [
                EV_STATES.index(ev["state"]) if ev.get("state") in EV_STATES else -1,
                ev.get("losses", 0),
                ev.get("trims", 0),
                ev.get("ecn_echoes", 0),
                ev.get("uses", 0),
                ev.get("plane", 0),
                ev.get("ev", 0),
                1 if ev.get("home") else 0,
            ]
            for ev in stats.get("evs", [])
            if isinstance(ev, dict)
        ]
        remote = stats.get("remote_addresses")
        peer = None  # the host the connection goes to, by its peer's first address
        if isinstance(remote, list) and remote and isinstance(remote[0], str):
            peer = host_of(self.topology, remote[0])
        return {
            "key": f"{connection.host}/{connection.qp}",
            "host": connection.host,
            "peer": peer,
            "qp": connection.qp,
            "active": now - connection.last_moved < 2.5,
            "goodput_bps": connection.goodput_bps,
            "history": list(connection.history),
            "bytes_acked": connection.last_acked,
            "retransmits": stats.get("retransmits_total"),
            "trims": stats.get("trims_seen"),
            "ecn_echoes": stats.get("ecn_echoes"),
            "srtt_s": stats.get("srtt_s"),
            "cwnd_bytes": stats.get("cwnd_bytes"),
            "ev_states": stats.get("ev_states", {}),
            "evs": evs,
        }


def describe_error(error: BaseException) -> str:
    """The text the page shows for ``error``: its message (else its type), cut short."""
    text = str(error) or type(error).__name__
    return text if len(text) <= ERROR_TEXT_CHARS else text[:ERROR_TEXT_CHARS] + "..."


def _newest(transfer: PageTransfer) -> float:
    return -transfer.started


def _shown(job: dict[str, Any]) -> bool:
    ago = job.get("ended_s_ago")
    return ago is None or ago < JOB_KEPT_S
