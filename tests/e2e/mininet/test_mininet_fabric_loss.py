"""Random loss on a fabric link drops UDP 4791 at about the rate and never LLDP or other
traffic, on every switch target (the rules live in the patch panel, which both targets share).

Frames are sent from one switch's port of a fabric link and counted at the other switch's
port (``frames``), with 20 % loss set on every fabric link: the UDP 4791 frames that arrive
are exactly those the rule did not drop, the drops are within six standard deviations of
the rate (a binomial draw; a test that fails about once in 10^9 runs), and every LLDP frame
and every frame to another UDP port arrives, as the rules' own LLDP counter also says. With
the rules removed, nothing is dropped.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from testbed.mininet import running_network
from tests.e2e.mininet.environment import REPO
from topologies import Topology

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("needs_bring_up")]

RATE = 0.2
FRAMES = 2000
#: Seconds the receiver waits for the sender's last frame at most (it stops at that frame).
RECEIVE_DEADLINE_S = 60.0


def _through_link(network, count: int) -> dict[str, int]:
    """Send ``count`` frames of each kind from l1's port 2 and count them at s1's port 1."""

    def command(switch: str, port: int, *args: str) -> list[str]:
        ifname = network.wiring.switch_ports[switch][port]
        netns = network.switch_netns(switch)
        where = ["ip", "netns", "exec", netns] if netns else []
        return [
            *where,
            sys.executable,
            "-m",
            "tests.e2e.testbed.frames",
            args[0],
            ifname,
            *args[1:],
        ]

    receiver = subprocess.Popen(
        command("s1", 1, "recv", str(RECEIVE_DEADLINE_S)),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        subprocess.run(command("l1", 2, "send", str(count)), cwd=REPO, check=True, timeout=120)
        counts: dict[str, int] = json.loads(receiver.stdout.readline())
    finally:
        receiver.kill()
        receiver.wait()
    assert "timed_out" not in counts, counts
    return counts


def test_loss_drops_udp_4791_at_about_the_rate_and_never_lldp(
    tiny_topology: Topology, target: str
) -> None:
    with running_network(tiny_topology, target=target) as network:
        network.set_fabric_loss(RATE)
        counts = _through_link(network, FRAMES)
        directions, lldp = network.fabric_loss_counters()
        forward = directions["l1:2->s1"]
        assert forward.matched == FRAMES  # every UDP 4791 frame was seen by its rule
        assert counts["roce"] == FRAMES - forward.dropped  # and only the rule dropped any
        sigma = math.sqrt(FRAMES * RATE * (1 - RATE))
        assert abs(forward.dropped - FRAMES * RATE) < 6 * sigma, forward
        assert counts["lldp"] == FRAMES and lldp == FRAMES
        assert counts["other"] == FRAMES
        assert directions["s1:1->l1"].matched == 0  # nothing went the other way
        assert len(directions) == 2 * len(tiny_topology.links)

        network.clear_fabric_loss()
        assert network.fabric_loss_counters() == ({}, 0)
        assert _through_link(network, 200) == {"roce": 200, "lldp": 200, "other": 200}
