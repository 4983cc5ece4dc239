"""``mrc-agent serve --path-mode``: ECMP changes nothing, structured gives an EV chooser, SRv6
gives the chooser and a network that sends in carriers, over IPv6 planes of the topology."""

from __future__ import annotations

import os
from ipaddress import ip_address

import pytest

from agent.io.errors import UsageError
from agent.io.path_modes import path_mode_setup
from topologies import load_topology


def _plane(host: str, v6: bool) -> bytes:
    nic = load_topology("leaf-spine").host(host).nics[0]
    return (nic.ipv6 if v6 else nic.ipv4).ip.packed


def test_ecmp_keeps_random_evs_and_the_default_sockets() -> None:
    setup = path_mode_setup("ecmp", None, [_plane("h1", False)])
    assert setup.choose_evs is None and setup.datagram_io is None


def test_structured_chooses_evs_and_keeps_the_default_sockets() -> None:
    setup = path_mode_setup("structured", "leaf-spine", [_plane("h1", False)])
    assert setup.choose_evs is not None and setup.datagram_io is None
    evs = setup.choose_evs([_plane("h3", False)], 8)
    assert evs is not None and len(evs) == 8


@pytest.mark.parametrize(
    ("mode", "topology", "planes", "message"),
    [
        ("srv6", "leaf-spine", [_plane("h1", False)], "runs over IPv6"),
        ("srv6", None, [_plane("h1", True)], "needs --topology"),
        ("srv6", "leaf-spine", [ip_address("2001:db8::1").packed], "not a host address"),
        ("ecmp", "leaf-spine", [_plane("h1", False)], "structured or srv6 only"),
        ("hashed", None, [_plane("h1", False)], "one of ecmp, structured, srv6"),
    ],
)
def test_a_mode_that_cannot_be_set_up_is_a_usage_error(mode, topology, planes, message) -> None:
    with pytest.raises(UsageError, match=message):
        path_mode_setup(mode, topology, planes)


@pytest.mark.skipif(os.geteuid() != 0, reason="SRv6 mode opens a raw socket: needs root")
def test_srv6_sends_through_carriers_and_counts_them() -> None:
    setup = path_mode_setup("srv6", "leaf-spine", [_plane("h1", True)])
    assert setup.choose_evs is not None and setup.datagram_io is not None
    try:
        counters = setup.datagram_io.counters()
        assert counters["srv6_carriers"] == {"in_carrier": 0, "without_carrier": 0}
    finally:
        setup.datagram_io.close()
