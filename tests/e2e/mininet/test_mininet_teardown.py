"""Teardown leaves nothing: after a normal exit, an exception, a failed bring-up, Ctrl-C or
SIGTERM, and (through ``clean``) after the owner was killed with SIGKILL.

"Nothing" is checked with ``ip netns``, ``ip link`` and ``pgrep`` for the run's prefix, plus
the pids the run had (BMv2, the Mininet shells, a process started on a host). Each test first
shows the run's footprint exists, so an empty result is not a check that cannot fail. Every
test runs on each switch target (``target`` fixture); the BMv2 start-up checks only on bmv2.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.mininet.environment import REPO
from tests.e2e.mininet.machine_state import (
    LineReader,
    assert_nothing_left,
    own_session_popen,
    run_state,
)
from topologies import Topology

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("needs_bring_up")]

CLI = [sys.executable, "-m", "testbed.mininet"]
READY = r"run (mn[0-9a-f]{4}) ready"


def _run_pids(network) -> set[int]:
    """BMv2 and Mininet shell pids of a running network."""
    pids = {getattr(switch, "bmv2_pid", None) for switch in network.mininet.switches}
    pids |= {node.pid for node in network.mininet.hosts + network.mininet.switches}
    pids.add(network.patch_panel.pid)
    return {pid for pid in pids if pid}


def _assert_tiny_footprint(prefix: str, target: str) -> None:
    """What the tiny topology puts on the machine: proof that the checks can see a run."""
    state = run_state(prefix)
    namespaces = {f"{prefix}-h1", f"{prefix}-h2", f"{prefix}-patch-panel"}
    if target == "linux":
        # Kernel switches: a namespace each, their ports inside it, nothing in the root.
        assert state.namespaces == namespaces | {f"{prefix}-{s}" for s in ("l1", "l2", "s1")}
        assert state.links == set()
        return
    assert state.namespaces == namespaces
    assert state.links == {
        f"{prefix}-l1-1",
        f"{prefix}-l1-2",
        f"{prefix}-l2-1",
        f"{prefix}-l2-2",
        f"{prefix}-s1-1",
        f"{prefix}-s1-2",
    }
    assert len(state.processes) >= 3  # one BMv2 per switch names the run's interfaces


def test_closing_a_network_leaves_no_namespace_link_or_process(
    tiny_topology: Topology, target: str
):
    from testbed.mininet import TestbedNetwork

    network = TestbedNetwork(tiny_topology, target=target)
    try:
        network.start()
        _assert_tiny_footprint(network.prefix, target)
        pids = _run_pids(network)
        host_process = subprocess.Popen(
            ["ip", "netns", "exec", network.host("h1").netns, "sleep", "600"],
            start_new_session=True,
        )
        pids.add(host_process.pid)
    finally:
        left = network.close()
    host_process.wait(10)
    assert left.empty
    assert_nothing_left(network.prefix, pids)
    assert not network.run_dir.exists()


def test_an_exception_inside_the_block_still_tears_everything_down(
    tiny_topology: Topology, target: str
):
    from testbed.mininet import running_network

    with (
        pytest.raises(RuntimeError, match="a failing test"),
        running_network(tiny_topology, target=target) as network,
    ):
        _assert_tiny_footprint(network.prefix, target)
        pids = _run_pids(network)
        raise RuntimeError("a failing test")
    assert_nothing_left(network.prefix, pids)


def test_a_switch_that_does_not_serve_in_time_fails_the_bring_up_and_leaves_nothing(
    tiny_topology: Topology, target: str
):
    _only_on_bmv2(target, "a kernel switch has nothing to start")
    from testbed.mininet import TestbedNetwork
    from testbed.mininet.bmv2_switch import SwitchStartError

    network = TestbedNetwork(tiny_topology, startup_timeout=0.0)
    with pytest.raises(SwitchStartError, match=r"l1: nothing listening on 127\.0\.0\.1:50151"):
        network.start()
    assert_nothing_left(network.prefix)


def test_a_taken_service_port_is_reported_before_anything_is_created(
    tiny_topology: Topology, target: str
):
    _only_on_bmv2(target, "kernel switches listen on no service port")
    from testbed.mininet import BringUpError, TestbedNetwork

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 50152))
        squatter.listen()
        network = TestbedNetwork(tiny_topology)
        with pytest.raises(BringUpError, match="switch l2: gRPC port 50152 is in use"):
            network.start()
    assert not network.run_dir.exists()
    assert_nothing_left(network.prefix)


def test_a_missing_tool_of_the_target_is_reported_before_anything_is_created(
    tiny_topology: Topology, target: str, monkeypatch: pytest.MonkeyPatch
):
    from testbed.mininet import BringUpError, TestbedNetwork, preflight

    missing = {"bmv2": "ethtool", "linux": "tc"}[target]
    real_which = shutil.which
    monkeypatch.setattr(
        preflight.shutil, "which", lambda name: None if name == missing else real_which(name)
    )
    network = TestbedNetwork(tiny_topology, target=target)
    with pytest.raises(BringUpError, match=f"command '{missing}' not found"):
        network.start()
    assert not network.run_dir.exists()
    assert_nothing_left(network.prefix)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_up_command_prints_a_summary_and_tears_down_on_a_signal(
    tiny_topology_file: Path, stop_signal: signal.Signals, target: str
):
    proc = own_session_popen([*CLI, "up", str(tiny_topology_file), "--target", target])
    reader = LineReader(proc)
    try:
        prefix = reader.wait_for(READY, timeout=120).group(1)
        summary = "".join(reader.lines)
        for expected in ("l1", "s1", "h1 ", "10.0.1.1/24", f"{prefix}-patch-panel"):
            assert expected in summary
        assert f"on target {target}" in summary
        _assert_tiny_footprint(prefix, target)
        proc.send_signal(stop_signal)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert f"run {prefix} torn down: nothing left" in reader.rest()
    assert_nothing_left(prefix)


def test_clean_removes_what_a_killed_run_left_and_spares_live_runs(
    tiny_topology_file: Path, tiny_topology: Topology, target: str
):
    proc = own_session_popen([*CLI, "up", str(tiny_topology_file), "--target", target])
    reader = LineReader(proc)
    try:
        prefix = reader.wait_for(READY, timeout=120).group(1)
    finally:
        proc.kill()
        proc.wait(10)
    # SIGKILL gave the owner no chance: the named namespaces remain, and on bmv2 the BMv2s
    # (own session) with their root-namespace veths.
    left_behind = run_state(prefix)
    assert left_behind.namespaces
    if target == "bmv2":
        assert left_behind.links and left_behind.processes

    from testbed.mininet import running_network

    with running_network(_on_other_ports(tiny_topology), target=target) as live:
        listed = subprocess.run([*CLI, "list"], capture_output=True, text=True, cwd=REPO)
        assert f"{prefix}  tiny  owner pid {proc.pid} (stale)" in listed.stdout
        assert f"{live.prefix}  tiny  owner pid" in listed.stdout
        cleaned = subprocess.run([*CLI, "clean"], capture_output=True, text=True, cwd=REPO)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert f"{prefix}: removed" in cleaned.stdout
        assert live.prefix not in cleaned.stdout
        assert not run_state(live.prefix).empty
    assert_nothing_left(prefix)


def _only_on_bmv2(target: str, why: str) -> None:
    if target != "bmv2":
        pytest.skip(f"not applicable on {target}: {why}")


def _on_other_ports(topology: Topology) -> Topology:
    """The same topology with service ports shifted by 100, to run beside another copy."""
    from dataclasses import replace

    switches = tuple(
        replace(switch, grpc_port=switch.grpc_port + 100, thrift_port=switch.thrift_port + 100)
        for switch in topology.switches
    )
    return replace(topology, switches=switches)
