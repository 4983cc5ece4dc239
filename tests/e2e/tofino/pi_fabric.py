"""A fabric of P4Runtime servers as a Tofino switch runs them, for the tofino southbound.

Each switch of a topology is one ``mrc_pi_server`` process: PI's gRPC server and proto
frontend (what ``bf_switchd --p4rt-server`` embeds) on PI's dummy target, with tables that keep
what is written and UDP cables between the servers that carry packet-outs to the peer as
packet-ins (``tools/pi_server/``). The frontend checks every write against the P4Info the
controller pushed; nothing forwards data packets. Links are cut and restored at both ends of
their cable, which the controller sees as LLDP probes lost.

* :class:`PiFabric`: the servers of one topology, on free ports, and the topology file
  rewritten to point at them.
* :func:`write_program`: a stand-in for ``p4c-barefoot``'s output directory (the committed
  bfrt.json, placeholder context and binary: PI's dummy target does not read them).
* :func:`held_by` and :func:`wanted_by`: what a switch holds, read by an observer connection,
  and what the controller's intent says it should hold, both as TNA records.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import finsy as fy
import yaml

from controller.intent.policy import routed_intent
from controller.southbound.device_ports import DevicePorts
from controller.southbound.finsy_codec import from_entity
from controller.southbound.records import RecordSet
from controller.southbound.tofino.device_config import DeviceConfigFormat
from controller.southbound.tofino.southbound import TRIM_CLASS_OF_SERVICE
from controller.southbound.tofino.tna_program import (
    TNA_P4INFO_PATH,
    tna_adapter,
    tna_read_targets,
    trim_sessions,
)
from hostenv.toolchain import MRC_PI_SERVER, find_tool
from topologies import LinkId, Topology, load_topology_text
from topologies.paths import PathMode

REPO = Path(__file__).resolve().parents[3]
SERVER = "mrc_pi_server"
OBSERVER_ELECTION_ID = 1
CONTROL = b"\xff\xff"
BF_P4RT = DeviceConfigFormat.BF_P4RT


def server_path() -> str | None:
    return find_tool(MRC_PI_SERVER)


def server_skip_reason() -> str | None:
    """Why the PI server tests cannot run here, or None."""
    if server_path() is None:
        return f"{SERVER} (PI's P4Runtime server) is not installed: make toolchain builds it"
    return None


def _free_ports(count: int, kind: int) -> list[int]:
    sockets = [socket.socket(socket.AF_INET, kind) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def write_program(root: Path) -> Path:
    """A p4c-barefoot output directory for the TNA program with stand-in context and binary."""
    pipe = root / "pipe"
    pipe.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "p4src" / "build" / "tna" / "bfrt.json", root / "bfrt.json")
    (pipe / "context.json").write_text(json.dumps({"program_name": "mrc", "stand_in": True}))
    (pipe / "tofino.bin").write_bytes(b"stand-in: PI's dummy target does not load a binary")
    entry = {"pipe_id": 0, "pipe_name": "pipe", "files": {"context": {"path": "pipe/context.json"}}}
    manifest = {"target": "tofino", "programs": [{"program_name": "mrc.p4", "pipes": [entry]}]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


class PiFabric:
    """One ``mrc_pi_server`` per switch of ``preset_text``'s topology, cabled as its links."""

    def __init__(self, topology_text: str, work: Path) -> None:
        document = yaml.safe_load(topology_text)
        names = [switch["name"] for switch in document["switches"]]
        grpc = _free_ports(len(names), socket.SOCK_STREAM)
        udp = _free_ports(len(names), socket.SOCK_DGRAM)
        for switch, port in zip(document["switches"], grpc, strict=True):
            switch["grpc_port"] = port
        self.topology_file = work / f"{document['name']}.yaml"
        self.topology_file.write_text(yaml.safe_dump(document, sort_keys=False))
        self.topology: Topology = load_topology_text(
            self.topology_file.read_text(), source=str(self.topology_file)
        )
        self.udp = dict(zip(names, udp, strict=True))
        self._work = work
        self._stack = ExitStack()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def _links_of(self, name: str) -> list[str]:
        links = []
        for link in self.topology.links:
            for near, far in ((link.a, link.b), (link.b, link.a)):
                if near.node == name and far.node in self.udp:
                    links += ["--link", f"{near.port}:{self.udp[far.node]}:{far.port}"]
        return links

    def start(self) -> None:
        for switch in self.topology.switches:
            self.start_switch(switch.name)

    def start_switch(self, name: str) -> None:
        switch = self.topology.switch(name)
        log = self._stack.enter_context((self._work / f"{name}.server.log").open("ab"))
        command = [
            server_path() or SERVER,
            f"127.0.0.1:{switch.grpc_port}",
            "--wire",
            str(self.udp[name]),
            *self._links_of(name),
        ]
        # cwd: PI's dummy target leaves its function counts in the working folder on exit.
        self.processes[name] = subprocess.Popen(
            command, cwd=self._work, stdout=log, stderr=subprocess.STDOUT
        )
        _wait_listening(switch.grpc_port, self.processes[name])

    def stop_switch(self, name: str) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(10)

    def close(self) -> None:
        for name in list(self.processes):
            self.stop_switch(name)
        self._stack.close()

    def _control(self, node: str, command: str) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(CONTROL + command.encode(), ("127.0.0.1", self.udp[node]))

    def cut(self, link: LinkId) -> None:
        """Cut ``link`` at both ends of its cable."""
        for end in (link.a, link.b):
            self._control(end.node, f"cut {end.port}")

    def restore(self, link: LinkId) -> None:
        for end in (link.a, link.b):
            self._control(end.node, f"restore {end.port}")

    def __enter__(self) -> PiFabric:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{SERVER} on port {port} exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{SERVER} did not listen on port {port} within {timeout_s} s")


def controller_config(
    path: Path,
    program: Path,
    routing: str = "reactive",
    path_mode: str = "ecmp",
    probe_interval_ms: int = 50,
) -> Path:
    """A controller configuration for the tofino target against the PI servers."""
    config: dict[str, Any] = {
        "target": "tofino",
        "grpc_host": "127.0.0.1",
        "tofino": {"program": str(program), "device_config": "bf_p4rt"},
        "routing": routing,
        "path_mode": path_mode,
        "probe_interval_ms": probe_interval_ms,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _tables() -> list[str]:
    return [table.name for table in fy.P4Schema(TNA_P4INFO_PATH).tables]


def held_by(topology: Topology, switch: str) -> RecordSet:
    """What ``switch`` holds, as TNA records, read by a passive observer connection."""
    return _observe(topology, switch, _read_records)


def sessions_held_by(topology: Topology, switch: str) -> set[tuple[int, int, int, str]]:
    """The clone sessions ``switch`` holds: id, class of service, truncation, replicas."""
    return _observe(topology, switch, _read_sessions)


async def _read_records(observer: fy.Switch) -> RecordSet:
    reader: Any = observer.read(tna_read_targets(_tables()))
    return RecordSet([from_entity(entity, observer.p4info) async for entity in reader])


async def _read_sessions(observer: fy.Switch) -> set[tuple[int, int, int, str]]:
    reader: Any = observer.read(fy.P4CloneSessionEntry())
    return {_session_key(entry) async for entry in reader}


def _session_key(entry: fy.P4CloneSessionEntry) -> tuple[int, int, int, str]:
    return (
        entry.session_id,
        entry.class_of_service,
        entry.packet_length_bytes,
        entry.replicas_str(),
    )


def _observe(topology: Topology, switch: str, read: Any) -> Any:
    handle = topology.switch(switch)

    async def observe() -> Any:
        observer = fy.Switch(
            f"observer-{switch}",
            f"127.0.0.1:{handle.grpc_port}",
            fy.SwitchOptions(
                p4info=TNA_P4INFO_PATH,
                device_id=handle.device_id,
                initial_election_id=OBSERVER_ELECTION_ID,
            ),
        )
        async with observer:
            return await read(observer)

    return asyncio.run(observe())


def wanted_by(
    topology: Topology,
    switch: str,
    down: frozenset[LinkId] = frozenset(),
    path_mode: PathMode = PathMode.ECMP,
    routed_down: frozenset[LinkId] | None = None,
) -> RecordSet:
    """The TNA records the controller's intent puts on ``switch`` with ``down`` links dead at
    their ends and ``routed_down`` (default: the same) known to the fabric-wide routing."""
    routed = down if routed_down is None else routed_down
    intent = routed_intent(topology, routed, down, path_mode).switch(switch)
    ports = DevicePorts.of(topology.switch(switch))
    return tna_adapter(_tables()).records(ports.intent(intent))


def sessions_wanted_by(
    topology: Topology, switch: str, down: frozenset[LinkId] = frozenset()
) -> set[tuple[int, int, int, str]]:
    """The trimming mirror sessions the controller gives ``switch`` on the SDE's server."""
    ports = routed_intent(topology, down, down).switch(switch).ports
    sessions = trim_sessions(
        ports, DevicePorts.of(topology.switch(switch)), TRIM_CLASS_OF_SERVICE[BF_P4RT]
    )
    return {_session_key(session.entity()) for session in sessions}


def links_between_switches(topology: Topology) -> Iterator[LinkId]:
    switches = {switch.name for switch in topology.switches}
    for link in topology.links:
        if link.a.node in switches and link.b.node in switches:
            yield link.id
