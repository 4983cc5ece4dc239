"""Names and synthetic addresses of the linux target: the runner and southbound agree on
them, and no two members ever share a gateway."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest

from controller.southbound.linux.names import (
    MAX_MEMBER_INDEX,
    gateway_v4,
    gateway_v6,
    interface_port,
    is_gateway,
    namespace_of,
    port_interface,
)


def test_switch_namespace_is_prefix_dash_switch_or_the_bare_name() -> None:
    assert namespace_of("mn3fa2", "s1") == "mn3fa2-s1"
    assert namespace_of("", "s1") == "s1"


def test_port_n_is_interface_swpn_and_back() -> None:
    assert port_interface(7) == "swp7"
    assert interface_port("swp7") == 7
    assert interface_port("swp12") == 12


@pytest.mark.parametrize("name", ["lo", "eth0", "swp", "swp0", "swp01", "swp3x", "xswp3"])
def test_other_interfaces_are_no_port(name: str) -> None:
    assert interface_port(name) is None


def test_port_zero_has_no_interface() -> None:
    with pytest.raises(ValueError, match="numbered from 1"):
        port_interface(0)


def test_gateways_are_distinct_link_local_and_never_network_or_broadcast() -> None:
    indexes = range(0, MAX_MEMBER_INDEX + 1)
    v4 = [gateway_v4(index) for index in indexes]
    assert len(set(v4)) == len(v4)
    assert all(address.is_link_local for address in v4)
    assert all(address.packed[3] not in (0, 255) for address in v4)
    assert all(address.packed[2] not in (0, 255) for address in v4)
    v6 = [gateway_v6(index) for index in range(0, 1000)]
    assert len(set(v6)) == len(v6)
    assert all(address.is_link_local for address in v6)


def test_first_gateways_read_plainly() -> None:
    assert gateway_v4(0) == IPv4Address("169.254.1.1")
    assert gateway_v4(250) == IPv4Address("169.254.2.1")
    assert gateway_v6(0) == IPv6Address("fe80::4d52:4300:0:1")


def test_gateways_are_recognised_and_host_gateways_are_not() -> None:
    assert is_gateway(gateway_v4(3)) and is_gateway(gateway_v6(3))
    # The runner's hosts use fe80::1 and 169.254.0.1 as their own (host-side) gateway.
    assert not is_gateway(IPv6Address("fe80::1"))
    assert not is_gateway(IPv6Address("fe80::200:ff:fe00:1"))  # an EUI-64 link-local
    assert not is_gateway(IPv4Address("10.0.1.1"))


@pytest.mark.parametrize("index", [-1, MAX_MEMBER_INDEX + 1])
def test_member_index_out_of_range_is_refused(index: int) -> None:
    with pytest.raises(ValueError, match="member index"):
        gateway_v4(index)
    with pytest.raises(ValueError, match="member index"):
        gateway_v6(index)
