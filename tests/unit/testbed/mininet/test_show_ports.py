"""Reading BMv2's own view of its ports from ``simple_switch_CLI``'s ``show_ports``."""

from __future__ import annotations

import pytest

pytest.importorskip("mininet.node", reason="Mininet is not installed")

from testbed.mininet.bmv2_switch import parse_show_ports

SHOW_PORTS = """\
Obtaining JSON from switch...
Done
Control utility for runtime P4 table manipulation
RuntimeCmd:   port #       iface name       status  extra info
==================================================
    1         mn5fa1-s1-1        DOWN
    2         mn5fa1-s1-2         UP
   17         mn5fa1-7-17         UP    pcap
RuntimeCmd:
"""


def test_each_port_line_gives_its_number_and_whether_it_is_up():
    assert parse_show_ports(SHOW_PORTS) == {1: False, 2: True, 17: True}


def test_output_without_port_lines_gives_no_ports():
    assert parse_show_ports("RuntimeCmd: Error: could not connect\n") == {}
