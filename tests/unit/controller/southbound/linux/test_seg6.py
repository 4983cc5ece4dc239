"""SRv6 on a kernel switch: each of the switch's own uSIDs becomes an End route with the
NEXT-C-SID flavour on its /48 locator and an End.DT6 route on the /128 a carrier has when that
uSID is its last; iproute2 writes them word for word; pyroute2's reading of them, including
the flavour attributes it cannot name, is recognised by action and table."""

from __future__ import annotations

import socket
import struct
from ipaddress import IPv6Network

import pytest
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from controller.intent.model import LocalUsid
from controller.southbound.linux.seg6 import (
    Seg6Action,
    Seg6LocalRoute,
    local_usid_routes,
    seg6local_of,
    usid_locator,
)

BLOCK = IPv6Network("fcbb:bb00::/32")


def test_a_locator_is_the_block_then_the_usid_as_a_48_bit_prefix() -> None:
    assert usid_locator(BLOCK, 1) == IPv6Network("fcbb:bb00:1::/48")
    assert usid_locator(IPv6Network("fcbb:bb01::/32"), 0xABCD) == IPv6Network("fcbb:bb01:abcd::/48")


@pytest.mark.parametrize("usid", [0, 1 << 16, -1])
def test_a_usid_outside_16_bits_or_end_of_carrier_is_refused(usid: int) -> None:
    with pytest.raises(ValueError, match=f"uSID {usid} does not fit 16 bits"):
        usid_locator(BLOCK, usid)


def test_a_block_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a /32"):
        usid_locator(IPv6Network("fcbb::/16"), 1)


def test_each_local_usid_gets_a_shifting_route_and_a_last_hop_route() -> None:
    routes = local_usid_routes([LocalUsid(BLOCK, 4), LocalUsid(IPv6Network("fcbb:bb01::/32"), 4)])
    assert routes == (
        Seg6LocalRoute(IPv6Network("fcbb:bb00:4::/48"), Seg6Action.END, next_csid=True),
        Seg6LocalRoute(IPv6Network("fcbb:bb00:4::/128"), Seg6Action.END_DT6, 254),
        Seg6LocalRoute(IPv6Network("fcbb:bb01:4::/48"), Seg6Action.END, next_csid=True),
        Seg6LocalRoute(IPv6Network("fcbb:bb01:4::/128"), Seg6Action.END_DT6, 254),
    )


def test_the_last_hop_route_is_exactly_a_carrier_with_nothing_left_after_this_usid() -> None:
    end, last = local_usid_routes([LocalUsid(BLOCK, 2)])
    carrier_here_last = IPv6Network("fcbb:bb00:2::/128").network_address
    carrier_passing = IPv6Network("fcbb:bb00:2:3::/128").network_address
    assert carrier_here_last in last.prefix and carrier_here_last in end.prefix
    assert carrier_passing in end.prefix and carrier_passing not in last.prefix
    # The kernel takes the longest match: the /128 for the last hop, the /48 otherwise.
    assert last.prefix.prefixlen > end.prefix.prefixlen


def test_iproute2_writes_end_with_next_csid_and_dt6_in_the_main_table() -> None:
    end, last = local_usid_routes([LocalUsid(BLOCK, 2)])
    assert end.ip_arguments() == (
        "encap", "seg6local", "action", "End", "flavors", "next-csid", "lblen", "32",
        "nflen", "16", "dev", "usid0",
    )  # fmt: skip
    assert last.ip_arguments() == (
        "encap", "seg6local", "action", "End.DT6", "table", "254", "dev", "usid0",
    )  # fmt: skip


def _nla(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


def _route_message(prefix: str, length: int, encap_type: int | None, encap: bytes) -> rtmsg:
    """A route as the kernel dumps it: header and plain attributes by pyroute2, the
    encapsulation appended raw, since pyroute2 cannot encode the flavour attribute."""
    message = rtmsg()
    message["family"] = socket.AF_INET6
    message["dst_len"] = length
    message["table"] = 254
    message["proto"] = 77
    message["type"] = 1
    message["attrs"] = [["RTA_TABLE", 254], ["RTA_DST", prefix], ["RTA_OIF", 1]]
    message.encode()
    data = bytearray(message.data)
    if encap_type is not None:
        data += _nla(21, struct.pack("H", encap_type))  # RTA_ENCAP_TYPE
        data += _nla(22 | 0x8000, encap)  # RTA_ENCAP, nested
    struct.pack_into("I", data, 0, len(data))
    decoded = rtmsg(bytes(data))
    decoded.decode()
    return decoded


def _seg6local(action: int, *extra: bytes) -> bytes:
    return _nla(1, struct.pack("I", action)) + b"".join(extra)


def _flavour(flags: int) -> bytes:
    """SEG6_LOCAL_FLAVORS: operation NEXT-C-SID, block 32 bits, node+function 16 bits."""
    fields = _nla(1, struct.pack("I", 1 << 3)) + _nla(2, b"\x20") + _nla(3, b"\x10")
    return _nla(11 | flags, fields)


@pytest.mark.parametrize("flags", [0x8000, 0], ids=["nested flag, as the kernel dumps it", "bare"])
def test_an_end_route_read_back_with_its_flavour_is_the_route_written(flags: int) -> None:
    prefix = IPv6Network("fcbb:bb00:2::/48")
    message = _route_message("fcbb:bb00:2::", 48, 7, _seg6local(1, _flavour(flags)))
    read = seg6local_of(message, prefix)
    assert read == Seg6LocalRoute(prefix, Seg6Action.END, next_csid=True)
    assert read in local_usid_routes([LocalUsid(BLOCK, 2)])


def test_an_end_route_the_kernel_kept_without_its_flavour_differs_from_the_route_written() -> None:
    # A kernel older than 6.1 takes the route and drops the attribute it does not know.
    prefix = IPv6Network("fcbb:bb00:2::/48")
    read = seg6local_of(_route_message("fcbb:bb00:2::", 48, 7, _seg6local(1)), prefix)
    assert read == Seg6LocalRoute(prefix, Seg6Action.END, next_csid=False)
    assert read not in local_usid_routes([LocalUsid(BLOCK, 2)])


def test_a_dt6_route_read_back_keeps_its_table() -> None:
    prefix = IPv6Network("fcbb:bb00:2::/128")
    message = _route_message("fcbb:bb00:2::", 128, 7, _seg6local(7, _nla(3, struct.pack("I", 254))))
    assert seg6local_of(message, prefix) == Seg6LocalRoute(prefix, Seg6Action.END_DT6, 254)


def test_an_action_never_written_reads_back_as_something_the_diff_rewrites() -> None:
    prefix = IPv6Network("fcbb:bb00:2::/48")
    end_x = _route_message("fcbb:bb00:2::", 48, 7, _seg6local(2))  # End.X
    read = seg6local_of(end_x, prefix)
    assert read is not None
    assert read not in local_usid_routes([LocalUsid(BLOCK, 2)])


def test_routes_without_seg6local_encapsulation_are_not_seg6local() -> None:
    prefix = IPv6Network("fcbb:bb00:2::/48")
    assert seg6local_of(_route_message("fcbb:bb00:2::", 48, None, b""), prefix) is None
    seg6_encap = _route_message("fcbb:bb00:2::", 48, 5, _nla(1, b"\0" * 8))  # LWTUNNEL seg6
    assert seg6local_of(seg6_encap, prefix) is None
