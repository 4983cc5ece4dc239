"""Routing policies on kernel switches (``mrc-controller run --target linux --routing ...``):
standard RoCEv2 crosses the fabric like MRC, DSCP kept; under ``static`` a cut is pruned at its
two ends only, so the far leaf keeps hashing onto the spine that lost the way (those flows are
dropped there), and a leaf whose every uplink died holds no route out, without harm to any
switch; under ``converge`` the far leaf is rerouted exactly the delay after the local pruning.

Root only (skips otherwise); run under the shared lock.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.controller_run import read_event_log
from tests.e2e.linux_southbound.conftest import SMALL_FABRIC
from tests.e2e.linux_southbound.kernel_lab import KernelFabricLab, udp_flows_arrive
from topologies import Topology
from topologies.model import Endpoint
from wire.constants import (
    ECN_ECT0,
    ECN_NOT_ECT,
    ROCE_DATA_OPCODES,
    ROCEV2_UDP_PORT,
    RoceDscp,
    RoceOpcode,
)

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

SWITCHES = {"l1", "l2", "s1", "s2"}
SOURCE_PORTS = tuple(range(42000, 42064))
#: l1's two uplinks, cut at the spine's end (l1 sees carrier loss): l1:2-s1:1 and l1:3-s2:1.
L1_UPLINKS = (Endpoint("s1", 1), Endpoint("s2", 1))
DEADLINE_S = 30.0


class Controller:
    """A controller process with its event log."""

    def __init__(self, process: subprocess.Popen[bytes], event_log: Path) -> None:
        self.process = process
        self.event_log = event_log

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_event_log(self.event_log) if e["event"] == name]

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"controller exited ({self.process.returncode}) before {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def in_service(self) -> None:
        self.wait_for(
            "every switch in service",
            lambda: {e["switch"] for e in self.events("switch_in_service")} == SWITCHES,
        )


@pytest.fixture
def start_controller(
    fabric_lab: KernelFabricLab, tmp_path: Path
) -> Iterator[Callable[[str], Controller]]:
    """Starts ``mrc-controller run --target linux --routing POLICY`` (one per test), stopped
    on exit (SIGTERM, then kill)."""
    topology_file = tmp_path / "fabric.yaml"
    topology_file.write_text(SMALL_FABRIC, encoding="utf-8")
    started: list[subprocess.Popen[bytes]] = []

    def start(routing: str) -> Controller:
        event_log = tmp_path / f"events-{len(started)}.jsonl"
        command = [
            sys.executable, "-m", "controller.cli", "run", str(topology_file),
            "--target", "linux", "--netns-prefix", fabric_lab.prefix, "--routing", routing,
            "--socket", str(tmp_path / f"ctl-{len(started)}.sock"), "--event-log", str(event_log),
        ]  # fmt: skip
        started.append(subprocess.Popen(command, stderr=subprocess.DEVNULL))
        controller = Controller(started[-1], event_log)
        controller.in_service()
        return controller

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture
def cut(fabric_lab: KernelFabricLab) -> Iterator[Callable[[Endpoint], None]]:
    """Sets a switch port down; every port it set down is up again when the test ends."""
    down: list[Endpoint] = []

    def set_down(end: Endpoint) -> None:
        fabric_lab.set_port(end, False)
        down.append(end)

    try:
        yield set_down
    finally:
        for end in down:
            fabric_lab.set_port(end, True)


def nexthops(lab: KernelFabricLab, switch: str, address: str) -> int | None:
    """How many next hops ``switch``'s route to ``address`` has (None: no route at all)."""
    out = lab.run_in(switch, ["ip", "-4", "route", "show", address])
    if not out.strip():
        return None
    return max(1, out.count("nexthop"))


def address(topology: Topology, host: str) -> str:
    return str(topology.host(host).nics[0].ipv4.ip)


RECEIVE_ROCE = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
s.bind(('', {port}))
s.settimeout(2.0)
print('ready', flush=True)
seen = []
try:
    while len(seen) < {count}:
        data, ancillary, _, peer = s.recvmsg(4096, socket.CMSG_SPACE(1))
        tos = ancillary[0][2][0] if ancillary else -1
        seen.append(f'{{peer[1]}}:{{data[0]}}:{{tos}}')
except TimeoutError:
    pass
print(' '.join(seen))
"""

SEND_ROCE = """
import socket
for sport, opcode, tos in {frames!r}:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    s.bind(('', sport))
    bth = bytes([opcode, 0, 0xFF, 0xFF, 0, 0, 0, 0x12, 0, 0, 0, 1])
    s.sendto(bth + bytes(36), ({destination!r}, {port}))
    s.close()
"""


def roce_datagrams_arrive(
    lab: KernelFabricLab, destination: str, frames: list[tuple[int, int, int]]
) -> set[tuple[int, int, int]]:
    """Send one UDP 4791 datagram per (source port, opcode, TOS) from h1 to h2; what arrived,
    as (source port, first payload byte, TOS as received)."""
    listener = subprocess.Popen(
        ["ip", "netns", "exec", lab.namespace("h2"), "python3", "-c",
         RECEIVE_ROCE.format(port=ROCEV2_UDP_PORT, count=len(frames))],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        send = SEND_ROCE.format(frames=frames, destination=destination, port=ROCEV2_UDP_PORT)
        lab.run_in("h1", ["python3", "-c", send])
        output, _ = listener.communicate(timeout=15)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    return {tuple(int(part) for part in word.split(":")) for word in output.split()}


def test_static_prunes_only_the_ends_and_the_far_leaf_keeps_using_the_dead_spine(
    start_controller, cut, fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    controller = start_controller("static")
    (started,) = controller.events("controller_started")
    assert started["routing"] == "static"
    h1, h2 = address(small_topology, "h1"), address(small_topology, "h2")
    # Standard RoCE crosses the kernel fabric like MRC: by address, DSCP and ECN kept.
    frames = [
        (43000 + i, int(opcode), (dscp << 2) | ecn)
        for i, (opcode, dscp, ecn) in enumerate(
            [(op, RoceDscp.DATA, ECN_ECT0) for op in sorted(ROCE_DATA_OPCODES)]
            + [(RoceOpcode.RC_ACKNOWLEDGE, RoceDscp.ACK, ECN_NOT_ECT)]
            + [(RoceOpcode.CNP, RoceDscp.CNP, ECN_NOT_ECT)]
        )
    ]
    assert roce_datagrams_arrive(fabric_lab, h2, frames) == set(frames)
    assert udp_flows_arrive(fabric_lab, "h2", "h1", h1, SOURCE_PORTS) == set(SOURCE_PORTS)

    cut(L1_UPLINKS[0])
    controller.wait_for("the local failover", lambda: bool(controller.events("failover")))
    (failover,) = controller.events("failover")
    assert failover["phase"] == "local" and "l2" not in failover["switches"]
    assert nexthops(fabric_lab, "s1", h1) is None, "s1 lost its last link toward l1"
    assert nexthops(fabric_lab, "l2", h1) == 2, "static: l2 still hashes onto s1"
    arrived = udp_flows_arrive(fabric_lab, "h2", "h1", h1, SOURCE_PORTS)
    assert arrived and arrived < set(SOURCE_PORTS), "the flows l2 hashed onto s1 died there"
    # The way out of l1 is pruned at l1 itself: every flow toward h2 arrives.
    assert udp_flows_arrive(fabric_lab, "h1", "h2", h2, SOURCE_PORTS) == set(SOURCE_PORTS)


def test_static_a_leaf_whose_every_uplink_died_holds_no_route_out_and_recovers(
    start_controller, cut, fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    controller = start_controller("static")
    h1, h2 = address(small_topology, "h1"), address(small_topology, "h2")
    assert nexthops(fabric_lab, "l1", h2) == 2
    for end in L1_UPLINKS:
        cut(end)
    controller.wait_for("both links down", lambda: len(controller.events("link_down")) == 2)
    controller.wait_for("l1's route out removed", lambda: nexthops(fabric_lab, "l1", h2) is None)
    assert udp_flows_arrive(fabric_lab, "h1", "h2", h2, SOURCE_PORTS[:8]) == set()
    assert nexthops(fabric_lab, "l1", h1) == 1, "l1 still delivers to its own host"
    for end in L1_UPLINKS:
        fabric_lab.set_port(end, True)
    controller.wait_for("l1's route out back", lambda: nexthops(fabric_lab, "l1", h2) == 2)
    assert udp_flows_arrive(fabric_lab, "h1", "h2", h2, SOURCE_PORTS) == set(SOURCE_PORTS)
    assert controller.process.poll() is None


def test_converge_reroutes_the_far_leaf_its_delay_after_the_local_pruning(
    start_controller, cut, fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    controller = start_controller("converge:1.5")
    h1 = address(small_topology, "h1")
    cut(L1_UPLINKS[0])
    controller.wait_for("the converged failover", lambda: len(controller.events("failover")) == 2)
    local, converged = controller.events("intent_changed")
    assert (local["phase"], converged["phase"]) == ("local", "converged")
    assert "l2" not in local["switches"] and "l2" in converged["switches"]
    assert converged["mono"] - local["mono"] >= 1.5
    controller.wait_for("l2 avoiding s1", lambda: nexthops(fabric_lab, "l2", h1) == 1)
    assert udp_flows_arrive(fabric_lab, "h2", "h1", h1, SOURCE_PORTS) == set(SOURCE_PORTS)
