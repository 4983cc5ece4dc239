"""Reading a kernel switch's port carrier from ``ip -j link show`` of its namespace."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mininet.node", reason="Mininet is not installed")

from testbed.mininet.kernel_switch import parse_carrier

PORTS = {"swp1": 1, "swp2": 2, "swp3": 3}


def _link(ifname: str, *flags: str) -> dict[str, object]:
    return {"ifindex": 2, "ifname": ifname, "flags": list(flags), "operstate": "UNKNOWN"}


def test_carrier_is_the_lower_up_flag_of_each_port():
    output = json.dumps(
        [
            _link("lo", "LOOPBACK", "UP", "LOWER_UP"),
            _link("swp1", "BROADCAST", "MULTICAST", "UP", "LOWER_UP"),
            # Admin up, peer down (a cut at the patch panel or the host): no carrier.
            _link("swp2", "NO-CARRIER", "BROADCAST", "MULTICAST", "UP"),
            _link("swp3", "BROADCAST", "MULTICAST"),
        ]
    )
    assert parse_carrier(output, PORTS) == {1: True, 2: False, 3: False}


def test_interfaces_that_are_no_port_are_left_out_and_missing_ports_are_absent():
    output = json.dumps([_link("lo", "UP", "LOWER_UP"), _link("swp1", "UP", "LOWER_UP")])
    assert parse_carrier(output, PORTS) == {1: True}
    assert parse_carrier("", PORTS) == {}
