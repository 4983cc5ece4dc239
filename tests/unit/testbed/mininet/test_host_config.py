"""The commands that configure a host NIC: pure argument lists, checked without root.

What they must achieve: no ARP/ND dependence (permanent neighbour entries for the gateway,
with the switch port's MAC), no connected subnet route (same-leaf traffic goes through the
switch too), addresses usable at once (no DAD), offloads off, and a restore that rebuilds
everything a link-down flushes.
"""

from __future__ import annotations

import pytest

from testbed.mininet.host_config import (
    GATEWAY_IPV4,
    GATEWAY_IPV6,
    OFFLOAD_FEATURES,
    nic_bring_up,
    nic_down,
    nic_prepare,
    nic_source_rules,
    offloads_off,
)
from testbed.mininet.wiring import HostNicWiring, plan_wiring
from topologies import load_topology


@pytest.fixture(scope="module")
def h1_eth0() -> HostNicWiring:
    wiring = plan_wiring(load_topology("leaf-spine"), "mn0a1b")
    return wiring.nics_of("h1")[0]


@pytest.fixture(scope="module")
def h1_plane1() -> HostNicWiring:
    wiring = plan_wiring(load_topology("two-plane"), "mn0a1b")
    return wiring.nics_of("h1")[1]


def test_offloads_named_in_the_brief_are_all_turned_off():
    command = offloads_off("eth0")
    assert command[:3] == ("ethtool", "-K", "eth0")
    pairs = dict(zip(command[3::2], command[4::2], strict=True))
    assert set(pairs) == set(OFFLOAD_FEATURES) >= {"rx", "tx", "sg", "tso", "gso", "gro"}
    assert set(pairs.values()) == {"off"}


def test_dad_and_router_discovery_are_off_before_the_nic_comes_up(h1_eth0):
    commands = nic_prepare(h1_eth0)
    settings = {command[2] for command in commands if command[0] == "sysctl"}
    assert {
        "net.ipv6.conf.eth0.accept_dad=0",
        "net.ipv6.conf.eth0.dad_transmits=0",
        "net.ipv6.conf.eth0.accept_ra=0",
        "net.ipv6.conf.eth0.router_solicitations=0",
        "net.ipv6.conf.eth0.keep_addr_on_down=1",
    } <= settings
    assert offloads_off("eth0") in commands
    assert all("up" not in command for command in commands)


def test_addresses_come_without_a_subnet_route_and_without_dad(h1_eth0):
    commands = nic_bring_up(h1_eth0)
    addr = [command for command in commands if command[2:4] == ("addr", "replace")]
    assert {command[4] for command in addr} == {"10.0.1.1/24", "fd00:0:1::1/64"}
    assert all("noprefixroute" in command for command in addr)
    assert any("nodad" in command for command in addr if command[1] == "-6")
    assert commands[0] == ("ip", "link", "set", "dev", "eth0", "up")


def test_gateways_are_permanent_neighbours_at_the_switch_ports_mac(h1_eth0):
    neighbours = [command for command in nic_bring_up(h1_eth0) if command[2] == "neigh"]
    assert {command[4] for command in neighbours} == {str(GATEWAY_IPV4), str(GATEWAY_IPV6)}
    for command in neighbours:
        assert command[command.index("lladdr") + 1] == "02:00:00:01:00:01"  # l1 port 1
        assert command[-2:] == ("nud", "permanent")


def test_the_whole_plane_and_its_usid_block_go_through_the_gateway_in_main_and_the_nics_table(
    h1_plane1,
):
    """The plane's uSID block too: the SRv6 path mode's carriers leave by the plane's NIC."""
    routes = [command for command in nic_bring_up(h1_plane1) if command[2] == "route"]
    destinations = {(command[4], command[command.index("table") + 1]) for command in routes}
    table = str(h1_plane1.table)
    assert destinations == {
        ("10.1.0.0/16", "main"),
        ("10.1.0.0/16", table),
        ("fd00:1::/32", "main"),
        ("fd00:1::/32", table),
        ("fcbb:bb01::/32", "main"),
        ("fcbb:bb01::/32", table),
    }
    own_addresses = {str(h1_plane1.nic.ipv4.ip), str(h1_plane1.nic.ipv6.ip)}
    for command in routes:
        assert command[command.index("dev") + 1] == "eth1"
        assert command[command.index("src") + 1] in own_addresses
    assert all("onlink" in command for command in routes if command[1] == "-4")


def test_traffic_from_a_nics_address_is_looked_up_in_that_nics_table(h1_plane1):
    rules = nic_source_rules(h1_plane1)
    assert {command[5] for command in rules} == {
        str(h1_plane1.nic.ipv4.ip),
        str(h1_plane1.nic.ipv6.ip),
    }
    assert all(command[command.index("lookup") + 1] == str(h1_plane1.table) for command in rules)


def test_a_cut_only_sets_the_host_end_down(h1_eth0):
    assert nic_down(h1_eth0) == [("ip", "link", "set", "dev", "eth0", "down")]
