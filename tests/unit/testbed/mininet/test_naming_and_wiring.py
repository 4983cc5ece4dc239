"""The wiring plan and names of a Mininet run: pure computations, no root or Mininet needed.

These pin down the properties bring-up relies on before it touches the machine: every
root-namespace name is unique, fits Linux's 15 characters and carries the run prefix (so a
crashed run is found by it), every switch-to-switch link is patched, and every host NIC sends
to the MAC of the switch port it is plugged into.
"""

from __future__ import annotations

import pytest

from testbed.mininet.naming import (
    MAX_IFNAME_LEN,
    NamingError,
    check_run_prefix,
    random_run_prefix,
    run_of,
    switch_ifname,
)
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.switch_target import switch_target
from testbed.mininet.wiring import plan_wiring
from topologies import Topology, load_topology

PREFIX = "mn0a1b"


@pytest.fixture(scope="module", params=["leaf-spine", "leaf-spine-4x4", "fat-tree", "two-plane"])
def preset(request) -> Topology:
    return load_topology(request.param)


def test_random_prefixes_have_the_run_prefix_form():
    for _ in range(20):
        assert check_run_prefix(random_run_prefix())


@pytest.mark.parametrize("bad", ["mrc12345", "mn12", "MN0a1b", "mn0a1bx", "mn0a1g"])
def test_a_malformed_prefix_is_rejected(bad):
    with pytest.raises(NamingError):
        check_run_prefix(bad)


def test_names_are_traced_back_to_their_run_and_foreign_names_to_none():
    assert run_of("mn0a1b-h1") == "mn0a1b"
    assert run_of("mn0a1b-l1-3") == "mn0a1b"
    # PTF and benchmark namespaces (hostenv/netns.py) and ordinary interfaces are not runs.
    for foreign in ("mrc1a2b3-ptf", "eth0", "mn0a1b", "mnxyz1-h1", "br0"):
        assert run_of(foreign) is None


def test_switch_interfaces_are_readable_when_they_fit_and_compact_otherwise():
    assert switch_ifname(PREFIX, "l1", 1, 3) == "mn0a1b-l1-3"
    long_name = switch_ifname(PREFIX, "spine12345", 17, 510)
    assert long_name == "mn0a1b-17-510"
    assert len(long_name) <= MAX_IFNAME_LEN


def test_an_interface_name_that_cannot_fit_is_an_error():
    with pytest.raises(NamingError):
        switch_ifname(PREFIX, "spine12345", 123456, 510)


def test_every_root_interface_is_unique_short_and_carries_the_prefix(preset):
    wiring = plan_wiring(preset, PREFIX)
    names = [name for ports in wiring.switch_ports.values() for name in ports.values()]
    assert len(names) == len(set(names))
    assert all(len(name) <= MAX_IFNAME_LEN for name in names)
    assert all(run_of(name) == PREFIX for name in names)
    assert run_of(wiring.patch_panel_netns) == PREFIX
    assert all(run_of(wiring.host_netns(host.name)) == PREFIX for host in preset.hosts)


def test_bmv2_binds_exactly_the_ports_the_topology_uses(preset):
    wiring = plan_wiring(preset, PREFIX)
    for switch in preset.switches:
        assert tuple(sorted(wiring.switch_ports[switch.name])) == preset.switch_ports(switch.name)


def test_every_switch_link_is_patched_through_its_own_bridge_and_no_host_link_is(preset):
    wiring = plan_wiring(preset, PREFIX)
    assert {patch.link.id for patch in wiring.patches} == {link.id for link in preset.links}
    assert len({patch.bridge for patch in wiring.patches}) == len(wiring.patches)
    assert wiring.host_link_ids == {link.id for link in preset.host_links}
    for patch in wiring.patches:
        ends = {(end.switch, end.port) for end in patch.ends}
        assert ends == {(end.node, end.port) for end in (patch.link.a, patch.link.b)}
        for end in patch.ends:
            assert end.switch_ifname == wiring.switch_ports[end.switch][end.port]
            assert len(end.panel_ifname) <= MAX_IFNAME_LEN


def test_each_nic_sends_to_the_mac_of_the_switch_port_it_is_plugged_into(preset):
    wiring = plan_wiring(preset, PREFIX)
    assert len(wiring.host_nics) == sum(len(host.nics) for host in preset.hosts)
    for nic_wiring in wiring.host_nics:
        nic = nic_wiring.nic
        switch = preset.switch(nic.switch)
        assert nic_wiring.gateway_mac == switch.port_mac(nic.switch_port)
        assert nic_wiring.switch_ifname == wiring.switch_ports[nic.switch][nic.switch_port]
        assert nic.ipv4.ip in nic_wiring.plane.ipv4_prefix
        assert nic.ipv6.ip in nic_wiring.plane.ipv6_prefix


def test_a_multi_nic_host_gets_one_routing_table_per_nic():
    two_plane = load_topology("two-plane")
    wiring = plan_wiring(two_plane, PREFIX)
    for host in two_plane.hosts:
        nics = wiring.nics_of(host.name)
        assert [nic.nic.name for nic in nics] == [nic.name for nic in host.nics]
        assert len({nic.table for nic in nics}) == len(nics)
        assert {nic.plane.id for nic in nics} == {0, 1}


def test_kernel_switch_ports_are_swp_n_in_the_switchs_own_namespace(preset):
    wiring = plan_wiring(preset, PREFIX, SwitchKind.KERNEL)
    for switch in preset.switches:
        assert wiring.switch_netns[switch.name] == f"{PREFIX}-{switch.name}"
        assert run_of(wiring.switch_netns[switch.name]) == PREFIX
        assert wiring.switch_ports[switch.name] == {
            port: f"swp{port}" for port in preset.switch_ports(switch.name)
        }


def test_kernel_switch_links_still_go_through_the_patch_panel_with_the_topologys_macs(preset):
    wiring = plan_wiring(preset, PREFIX, SwitchKind.KERNEL)
    assert {patch.link.id for patch in wiring.patches} == {link.id for link in preset.links}
    for patch in wiring.patches:
        for end in patch.ends:
            assert end.switch_ifname == f"swp{end.port}"
    for nic_wiring in wiring.host_nics:
        nic = nic_wiring.nic
        assert nic_wiring.switch_ifname == f"swp{nic.switch_port}"
        assert nic_wiring.gateway_mac == preset.switch(nic.switch).port_mac(nic.switch_port)


def test_bmv2_ports_stay_in_the_root_namespace(preset):
    wiring = plan_wiring(preset, PREFIX)
    assert wiring.kind is SwitchKind.BMV2
    assert set(wiring.switch_netns.values()) == {None}


def test_kernel_switch_namespaces_never_collide_with_host_or_panel_namespaces(preset):
    wiring = plan_wiring(preset, PREFIX, SwitchKind.KERNEL)
    namespaces = [*wiring.switch_netns.values()]
    namespaces += [wiring.host_netns(host.name) for host in preset.hosts]
    namespaces.append(wiring.patch_panel_netns)
    assert len(namespaces) == len(set(namespaces))


def test_an_unknown_switch_target_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown switch target 'netfpga'; targets: bmv2, linux"):
        switch_target("netfpga")


def test_tofino_is_refused_because_there_is_no_tofino_switch_to_start_here():
    with pytest.raises(ValueError, match=r"'tofino': there is no Tofino switch to start here"):
        switch_target("tofino")
