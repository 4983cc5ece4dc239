"""``mrc-controller run --target linux`` on kernel namespaces: it programs every switch, finds
a cut from carrier (no LLDP) with the same events and failover record as on BMv2, routes the
far switches around it, and stops cleanly on SIGTERM.

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

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

SWITCHES = {"l1", "l2", "s1", "s2"}
SOURCE_PORTS = tuple(range(41000, 41064))


class ControllerRun:
    """A controller process and its event log."""

    def __init__(self, process: subprocess.Popen[bytes], event_log: Path) -> None:
        self.process = process
        self.event_log = event_log

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        # Complete lines only: the controller may be writing one as this reads (a half-written
        # failover record once failed this test with a JSONDecodeError).
        events = read_event_log(self.event_log)
        return [e for e in events if name is None or e["event"] == name]

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"controller exited ({self.process.returncode}) before {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.events()[-5:]}")
            time.sleep(0.05)


@pytest.fixture
def controller(fabric_lab: KernelFabricLab, tmp_path: Path) -> Iterator[ControllerRun]:
    """``mrc-controller run`` for the lab's fabric, stopped (SIGTERM, then kill) on exit."""
    topology_file = tmp_path / "fabric.yaml"
    topology_file.write_text(SMALL_FABRIC, encoding="utf-8")
    event_log = tmp_path / "events.jsonl"
    command = [
        sys.executable, "-m", "controller.cli", "run", str(topology_file),
        "--target", "linux", "--netns-prefix", fabric_lab.prefix,
        "--socket", str(tmp_path / "ctl.sock"), "--event-log", str(event_log),
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    run = ControllerRun(process, event_log)
    try:
        yield run
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.stderr is not None
        process.stderr.close()


def in_service(run: ControllerRun) -> set[str]:
    return {event["switch"] for event in run.events("switch_in_service")}


def test_controller_programs_the_fabric_and_routes_around_a_cut_it_saw_by_carrier(
    controller: ControllerRun, fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    controller.wait_for("every switch in service", lambda: in_service(controller) == SWITCHES)
    (started,) = controller.events("controller_started")
    assert started["link_evidence"] == "carrier"
    h1 = str(small_topology.host("h1").nics[0].ipv4.ip)
    fabric_lab.run_in("h2", ["ping", "-c", "1", "-W", "2", h1])
    cut = Endpoint("s1", 1)  # s1's end of l1-s1: l1 sees carrier loss
    fabric_lab.set_port(cut, False)
    try:
        controller.wait_for("the failover record", lambda: bool(controller.events("failover")))
        (down,) = controller.events("link_down")
        assert down["link"] == "l1:2<->s1:1"
        (failover,) = controller.events("failover")
        assert failover["complete"] and "l2" in failover["switches"]
        # The kernel alone cannot fix the way back (l2 hashes onto s1, whose port toward l1
        # is down): the controller's new intent for l2 must.
        arrived = udp_flows_arrive(fabric_lab, "h2", "h1", h1, SOURCE_PORTS)
        assert arrived == set(SOURCE_PORTS)
    finally:
        fabric_lab.set_port(cut, True)
    controller.wait_for("the link back up", lambda: bool(controller.events("link_up")))
    # link_up is logged when the intent changes; l2's route is rewritten after it (the second
    # failover record), so wait for the route rather than read it at once.
    controller.wait_for(
        "l2 hashing over both spines again",
        lambda: fabric_lab.run_in("l2", ["ip", "-4", "route", "show", h1]).count("nexthop") == 2,
    )


def test_controller_stops_cleanly_on_sigterm(controller: ControllerRun) -> None:
    controller.wait_for("every switch in service", lambda: in_service(controller) == SWITCHES)
    controller.process.send_signal(signal.SIGTERM)
    assert controller.process.wait(timeout=10) == 0
    assert controller.events("controller_stopped")
