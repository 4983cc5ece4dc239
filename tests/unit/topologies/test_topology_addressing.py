"""The derivation scheme produces the documented values and refuses what it cannot encode."""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv6Interface

import pytest

from topologies.addressing import (
    AddressingError,
    default_grpc_port,
    default_thrift_port,
    host_nic_mac,
    nic_ipv4,
    nic_ipv6,
    normalize_mac,
    plane_ipv4_prefix,
    plane_ipv6_prefix,
    switch_port_mac,
)


def test_switch_port_mac_is_locally_administered_and_encodes_device_and_port():
    assert switch_port_mac(0x1234, 0x01FE) == "02:00:12:34:01:fe"


def test_host_nic_mac_encodes_host_plane_and_nic():
    assert host_nic_mac(300, 2, 1) == "02:10:01:2c:02:01"


def test_nic_addresses_follow_plane_edge_and_port():
    assert nic_ipv4(1, 2, 3) == IPv4Interface("10.1.2.3/24")
    assert nic_ipv6(1, 12, 10) == IPv6Interface("fd00:1:c::a/64")
    assert nic_ipv4(1, 2, 3).network.subnet_of(plane_ipv4_prefix(1))
    assert nic_ipv6(1, 2, 3).network.subnet_of(plane_ipv6_prefix(1))


def test_service_ports_start_at_the_usual_values_for_device_one():
    assert (default_grpc_port(1), default_thrift_port(1)) == (50051, 9090)


@pytest.mark.parametrize(
    "derive",
    [
        lambda: switch_port_mac(0x10000, 1),
        lambda: host_nic_mac(0, 0, 0),
        lambda: nic_ipv4(256, 1, 1),
        lambda: nic_ipv4(0, 256, 1),
        lambda: nic_ipv4(0, 1, 255),
        lambda: nic_ipv4(0, 1, 0),
    ],
)
def test_values_outside_the_scheme_are_refused(derive):
    with pytest.raises(AddressingError, match="outside"):
        derive()


def test_macs_are_normalised_to_lower_case_colon_form():
    assert normalize_mac("02-AA-bb-CC-dd-EE") == "02:aa:bb:cc:dd:ee"


@pytest.mark.parametrize(
    ("text", "reason"),
    [("02:00:00", "malformed"), ("03:00:00:00:00:01", "multicast"), ("00:00:00:00:00:00", "not")],
)
def test_unusable_macs_are_refused(text, reason):
    with pytest.raises(AddressingError, match=reason):
        normalize_mac(text)
