"""A fabric without Mininet for the live page's tests: a real status socket with a
subscription (``serve_status`` and an ``EventFeed``, the controller's own code) answering a
scripted status, agents' control sockets answering a scripted ``status``, and ``Actions``
that cut and restore links in that script, as the testbed would.

Everything runs on an event loop in a thread of its own; ``FakeFabric`` is a context manager
that removes its sockets however the test ends.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.app.eventlog import EventLog
from controller.app.status_socket import EventFeed, serve_status
from controller.app.watch import describe_topology
from testbed.agents import TransferSpec
from testbed.live.paths import Flow, PathUnknown
from topologies import load_topology
from topologies.model import Topology

EV_STATES = ("GOOD", "SKIP", "ASSUMED_BAD", "DENIED")


def sending_connection(
    qp: int, acked: int, evs: int = 64, peer: str | None = None
) -> dict[str, Any]:
    """An agent's status row of a connection that sends, with an EV table of every state;
    ``peer`` is the address of the host it sends to, on plane 0."""
    return {
        "qp": qp,
        **({"remote_addresses": [peer]} if peer is not None else {}),
        "data_packets_sent": acked // 1000 + 1,
        "bytes_acked": acked,
        "bytes_in_flight": 4096,
        "retransmits_total": 3,
        "trims_seen": 2,
        "ecn_echoes": 1,
        "srtt_s": 0.0004,
        "cwnd_bytes": 65536,
        "ev_states": {"GOOD": evs - 3, "SKIP": 1, "ASSUMED_BAD": 1, "DENIED": 1},
        "evs": [
            {
                "plane": 0,
                "ev": 0x10000 * (49152 + i),
                "state": EV_STATES[i % 4] if i < 4 else "GOOD",
                "home": True,
                "uses": 10 + i,
                "losses": 1 if i == 2 else 0,
                "trims": 1 if i == 5 else 0,
                "ecn_echoes": 1 if i == 6 else 0,
            }
            for i in range(evs)
        ],
    }


class FakeFabric:
    """Controller and agent sockets for ``topology``; :meth:`cut` and :meth:`restore` change
    the links' state as a controller would report it (an event at once, then the status)."""

    def __init__(self, topology: Topology | str, directory: Path) -> None:
        self.topology = load_topology(topology) if isinstance(topology, str) else topology
        self.directory = directory
        self.controller_socket = directory / "ctl.sock"
        self.agent_sockets = {h.name: directory / f"{h.name}.sock" for h in self.topology.hosts}
        description = describe_topology(self.topology)
        self.tracked = [link["id"] for link in description["links"] if link["kind"] == "fabric"]
        self.down: set[str] = set()
        self.uptime = 0.0
        self.tx = 0
        #: Host -> connections its agent reports (tests set them).
        self.connections: dict[str, list[dict[str, Any]]] = {}
        self.agent_polls = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._log: EventLog | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self) -> FakeFabric:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        feed = EventFeed(hello={"topology": describe_topology(self.topology)})
        self._log = EventLog(io.StringIO())
        self._log.add_listener(feed.publish)
        servers = [await serve_status(self.controller_socket, self._status, feed)]
        for host, path in self.agent_sockets.items():
            servers.append(await asyncio.start_unix_server(self._agent(host), path=str(path)))
        self._ready.set()
        await self._stop.wait()
        for server in servers:
            server.close()
            await server.wait_closed()

    async def _status(self) -> dict[str, Any]:
        self.uptime += 1.0
        self.tx += 125_000  # 1 Mb/s on every switch port
        counters = {
            switch.name: {
                "ports": {
                    str(port): {"tx_bytes": self.tx, "rx_bytes": self.tx // 2}
                    for port in self.topology.switch_ports(switch.name)
                },
                "members": {},
                "not_counted": [],
            }
            for switch in self.topology.switches
        }
        return {
            "topology": self.topology.name,
            "generation": 1 + len(self.down),
            "uptime_s": self.uptime,
            "routing": {"policy": "reactive", "mode": "reactive", "delay_s": 0},
            "switches": {
                s.name: {"role": "primary", "in_service": True} for s in self.topology.switches
            },
            "links": [
                {"link": link, "state": "down" if link in self.down else "up", "changed_at": None}
                for link in self.tracked
            ],
            "counters": counters,
            "last_failover": None,
        }

    def _agent(self, host: str) -> Callable[..., Any]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                request = json.loads(line)
                self.agent_polls += 1
                planes = [str(nic.ipv4.ip) for nic in self.topology.host(host).nics]
                result = {"planes": planes, "connections": self.connections.get(host, [])}
                reply = {"id": request["id"], "ok": True, "result": result}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
            writer.close()

        return serve

    def _emit(self, event: str, **fields: object) -> None:
        assert self._loop is not None and self._log is not None
        log = self._log
        self._loop.call_soon_threadsafe(lambda: log.emit(event, **fields))

    def cut(self, link: str) -> None:
        self.down.add(link)
        self._emit("link_down", link=link, since_ms=1.0)

    def restore(self, link: str) -> None:
        self.down.discard(link)
        self._emit("link_up", link=link, since_ms=1.0)


class FakeActions:
    """The page's operations on a ``FakeFabric``: each call is recorded."""

    def __init__(self, fabric: FakeFabric, can_restart: bool = False) -> None:
        self.fabric = fabric
        self.can_restart = can_restart
        self.calls: list[tuple[str, ...]] = []
        self.cut: set[str] = set()
        #: The run's controllers as the page shows them.
        self.stances: dict[str, str] = {"primary": "primary", "backup": "backup"}

    def _link(self, a: str, b: str) -> str:
        for link in self.fabric.topology.all_links:
            ends = {str(link.a), str(link.b), link.a.node, link.b.node}
            if a in ends and b in ends:
                return str(link.id)
        raise ValueError(f"no link between {a} and {b}")

    def fail(self, a: str, b: str) -> str:
        link = self._link(a, b)
        self.calls.append(("fail", link))
        self.cut.add(link)
        self.fabric.cut(link)
        return f"cut {link}"

    def restore(self, a: str, b: str) -> str:
        link = self._link(a, b)
        self.calls.append(("restore", link))
        self.cut.discard(link)
        self.fabric.restore(link)
        return f"restored {link}"

    def restart(self, switch: str) -> str:
        self.calls.append(("restart", switch))
        return f"restarted {switch}"

    def transfer(
        self, spec: TransferSpec, on_progress: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        self.calls.append(("transfer", spec.source, spec.destination))
        on_progress({"goodput_bps": 8e6, "total_bytes": 1000})
        return {"bytes": 1000, "seconds": 1.0, "goodput_bps": 8e6}

    def cut_links(self) -> frozenset[str]:
        return frozenset(self.cut)

    def controllers(self) -> dict[str, str]:
        return dict(self.stances)

    def restart_controller(self, name: str) -> str:
        self.calls.append(("controller_restart", name))
        self.stances[name] = "backup"
        return f"restarted the {name} controller: backup on every switch"


class FakeNextHops:
    """Shortest-path ECMP over the topology, as a switch of either target does it: among the
    ports one hop nearer the destination's NIC, the UDP source port modulo their number picks
    one. ``blind`` switches cannot say (as a switch whose tables cannot be read)."""

    def __init__(self, topology: Topology, blind: frozenset[str] = frozenset()) -> None:
        self.topology = topology
        self.blind = blind
        self.asked: list[tuple[str, int]] = []

    def _distances(self, destination: str) -> dict[str, int]:
        (host, nic) = next(
            (h, n) for h, n in self.topology.nics() if destination in (str(n.ipv4.ip),)
        )
        distance = {host.name: 0, nic.switch: 1}
        frontier = [nic.switch]
        while frontier:
            following = []
            for node in frontier:
                for link in self.topology.links:
                    if node in (link.a.node, link.b.node):
                        far = link.far_end(node).node
                        if far not in distance:
                            distance[far] = distance[node] + 1
                            following.append(far)
            frontier = following
        return distance

    def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
        self.asked.append((switch, in_port))
        if switch in self.blind:
            raise PathUnknown("its tables cannot be read")
        distance = self._distances(str(flow.destination))
        nearer = sorted(
            link.end_at(switch).port
            for link in self.topology.all_links
            if switch in (link.a.node, link.b.node)
            and distance.get(link.far_end(switch).node, 99) < distance[switch]
            and (
                not self.topology.is_host(link.far_end(switch).node)
                or distance[link.far_end(switch).node] == 0
            )
        )
        return nearer[flow.source_port % len(nearer)]
