"""The live view's path of an EV on the linux target is the kernel's own answer: for every
source port, the port ``KernelNextHops`` names (``ip route get ... iif``) is the one a
forwarded packet of that flow leaves by, through a four-way multipath route with the
southbound's hash policy. Two namespaces: a sender and a switch; needs root and iproute2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from pyroute2 import netns

from hostenv.toolchain import is_root
from testbed.live.paths import Flow, KernelNextHops
from wire.entropy import ev_from_headers

pytestmark = pytest.mark.skipif(not is_root(), reason="needs root (network namespaces)")

SWITCH = "sw"
UPLINKS = (2, 3, 4, 5)
SOURCE, DESTINATION = "10.77.0.2", "10.78.0.5"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def fabric() -> Iterator[tuple[str, str]]:
    prefix = f"lvp{os.getpid()}"
    switch, sender = f"{prefix}-{SWITCH}", f"{prefix}-tx"
    try:
        _ip("netns", "add", switch)
        _ip("netns", "add", sender)
        for name in (switch, sender):  # no IPv6 neighbour discovery to blur the counters
            _ip("netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            _ip("netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        _ip("-n", switch, "link", "add", "swp1", "type", "veth", "peer", "name", "tx0")
        _ip("-n", switch, "link", "set", "tx0", "netns", sender)
        for port in UPLINKS:
            _ip("-n", switch, "link", "add", f"swp{port}", "type", "veth", "peer", f"out{port}")
            _ip("-n", switch, "link", "set", f"out{port}", "up")
            _ip("-n", switch, "link", "set", f"swp{port}", "up")
            _ip("-n", switch, "neigh", "add", f"169.254.0.{port}", "lladdr",
                f"02:00:00:00:00:{port:02x}", "dev", f"swp{port}", "nud", "permanent")  # fmt: skip
        _ip("-n", switch, "link", "set", "swp1", "up")
        _ip("-n", switch, "addr", "add", "10.77.0.1/24", "dev", "swp1")
        for key, value in {
            "net.ipv4.ip_forward": "1",
            "net.ipv4.fib_multipath_hash_policy": "1",  # as the linux southbound sets it
            "net.ipv4.conf.all.rp_filter": "0",
            "net.ipv4.conf.swp1.rp_filter": "0",
        }.items():
            _ip("netns", "exec", switch, "sysctl", "-qw", f"{key}={value}")
        hops = []
        for port in UPLINKS:
            hops += ["nexthop", "via", f"169.254.0.{port}", "dev", f"swp{port}", "onlink"]
        _ip("-n", switch, "route", "add", "10.78.0.0/24", *hops)
        _ip("-n", sender, "link", "set", "lo", "up")
        _ip("-n", sender, "link", "set", "tx0", "up")
        _ip("-n", sender, "addr", "add", f"{SOURCE}/24", "dev", "tx0")
        _ip("-n", sender, "route", "add", "default", "via", "10.77.0.1")
        yield prefix, sender
    finally:
        for name in (switch, sender):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _sent_by_port(switch: str) -> dict[int, int]:
    out = subprocess.run(
        ["ip", "-n", switch, "-s", "-j", "link", "show"], check=True, capture_output=True
    ).stdout
    return {
        int(link["ifname"][3:]): link["stats64"]["tx"]["packets"]
        for link in json.loads(out)
        if link["ifname"] in {f"swp{port}" for port in UPLINKS}
    }


def _port_that_sent(switch: str, before: dict[int, int], packets: int) -> int:
    """The uplink whose counter grew by ``packets`` (forwarding runs after ``sendto``
    returns: wait for it, within a generous deadline)."""
    deadline = time.monotonic() + 10
    while True:
        after = _sent_by_port(switch)
        grown = [port for port in UPLINKS if after[port] > before[port]]
        if sum(after[port] - before[port] for port in UPLINKS) >= packets:
            assert len(grown) == 1, (before, after)
            return grown[0]
        assert time.monotonic() < deadline, f"{packets} packets not forwarded: {before} {after}"
        time.sleep(0.01)


def test_the_kernels_answer_is_the_port_its_packets_leave_by(fabric):
    prefix, sender = fabric
    switch = f"{prefix}-{SWITCH}"
    hops = KernelNextHops(prefix)
    chosen: dict[int, int] = {}
    left_by: dict[int, int] = {}
    for source_port in range(40000, 40064):
        flow = Flow.of_ev(SOURCE, DESTINATION, ev_from_headers(source_port))
        chosen[source_port] = hops.egress_port(SWITCH, 1, flow)
        before = _sent_by_port(switch)
        netns.pushns(sender)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind((SOURCE, source_port))
                for _ in range(3):
                    udp.sendto(b"x" * 32, (DESTINATION, flow.destination_port))
        finally:
            netns.popns()
        left_by[source_port] = _port_that_sent(switch, before, 3)
    assert chosen == left_by
    assert set(chosen.values()) == set(UPLINKS)  # the ports do spread over every next hop
