"""SRv6 uSID carriers: address layout, the shift, decoding and errors."""

from __future__ import annotations

from ipaddress import IPv6Address, IPv6Network

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from wire import srv6

BLOCK = IPv6Network("fcbb:bb00::/32")


def test_the_address_is_the_block_then_the_usids_then_end_of_carrier() -> None:
    assert srv6.carrier_address(BLOCK, [1, 3, 2]) == IPv6Address("fcbb:bb00:1:3:2::")
    assert srv6.parse_carrier("fcbb:bb00:1:3:2::") == srv6.UsidCarrier(BLOCK, (1, 3, 2))


def test_the_shift_drops_the_active_usid_and_keeps_the_block() -> None:
    after = srv6.shifted("fcbb:bb00:1:3:2::")
    assert after == IPv6Address("fcbb:bb00:3:2::")
    assert srv6.parse_carrier(srv6.shifted(srv6.shifted(after))).usids == ()


def test_six_usids_fill_the_address_and_seven_do_not_fit() -> None:
    full = srv6.carrier_address(BLOCK, [1, 2, 3, 4, 5, 6])
    assert srv6.parse_carrier(full).usids == (1, 2, 3, 4, 5, 6)
    with pytest.raises(srv6.Srv6Error, match="1 to 6"):
        srv6.carrier_address(BLOCK, [1] * 7)


@pytest.mark.parametrize("usids", [[0], [1, 0x10000]])
def test_a_usid_outside_its_range_is_refused(usids: list[int]) -> None:
    with pytest.raises(srv6.Srv6Error, match="uSID"):
        srv6.carrier_address(BLOCK, usids)


def test_a_list_with_a_hole_is_malformed() -> None:
    with pytest.raises(srv6.Srv6Error, match="follows End-of-Carrier"):
        srv6.parse_carrier("fcbb:bb00:1:0:2::")


def test_a_block_must_be_a_slash_32() -> None:
    with pytest.raises(srv6.Srv6Error, match="/32"):
        srv6.carrier_address(IPv6Network("fcbb::/16"), [1])


@pytest.mark.parametrize("inner", [IP(src="10.0.1.1", dst="10.0.2.2", tos=0x12), IPv6(tc=0x12)])
def test_encapsulation_decodes_back_with_scapy(inner) -> None:
    frame = Ether() / srv6.encapsulate(
        inner / UDP(dport=4791), src="fd00::1", block=BLOCK, usids=[1, 4, 2]
    )
    decoded = Ether(bytes(frame))
    carrier = srv6.carrier_of(decoded)
    assert carrier is not None and carrier.usids == (1, 4, 2)
    assert decoded[IPv6].tc == 0x12  # the outer copies the inner's DSCP and ECN
    inner_back = srv6.decapsulate(decoded)
    assert type(inner_back) is type(inner)
    assert inner_back[UDP].dport == 4791


def test_a_plain_packet_is_no_carrier() -> None:
    plain = Ether(bytes(Ether() / IPv6() / UDP()))
    assert srv6.carrier_of(plain) is None
    with pytest.raises(srv6.Srv6Error):
        srv6.decapsulate(plain)
