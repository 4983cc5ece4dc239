"""The headers the raw sender writes and the ancillary data the receiver reads, checked
against scapy's parser and checksum code (no sockets needed)."""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6

from agent.core import IpContext, OutgoingDatagram
from agent.io.linux import IP_PKTINFO, IPV6_FLOWINFO, IPV6_PKTINFO, IPV6_TCLASS
from agent.io.raw_sender import RawSender, ipv4_udp_header, ipv6_udp_header, udp6_checksum
from agent.io.udp_receiver import parse_ancillary_v4, parse_ancillary_v6
from wire.constants import ECN_ECT0, ECN_NOT_ECT, ROCEV2_UDP_PORT

SRC4, DST4 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
SRC6 = socket.inet_pton(socket.AF_INET6, "fd00::1")
DST6 = socket.inet_pton(socket.AF_INET6, "fd00::2")


def _datagram(src: bytes, dst: bytes, payload: bytes, **fields: int) -> OutgoingDatagram:
    values = {"src_port": 0xC123, "flow_label": 0, "dscp": 4, "ecn": ECN_ECT0, **fields}
    return OutgoingDatagram(payload, IpContext(src=src, dst=dst), 0, **values)


def test_ipv4_header_has_id_zero_df_the_class_dscp_ect0_and_the_ev_source_port():
    datagram = _datagram(SRC4, DST4, b"p" * 100, dscp=4, ecn=ECN_ECT0, src_port=0xC0DE)
    packet = IP(ipv4_udp_header(datagram) + datagram.payload)
    assert packet.version == 4 and packet.ihl == 5
    assert packet.id == 0
    assert packet.flags == "DF" and packet.frag == 0
    assert packet.tos == (4 << 2) | ECN_ECT0
    assert packet.proto == 17 and packet.ttl == 64
    assert packet.len == 20 + 8 + 100
    assert (packet.src, packet.dst) == ("10.0.0.1", "10.0.0.2")
    udp = packet[UDP]
    assert (udp.sport, udp.dport) == (0xC0DE, ROCEV2_UDP_PORT)
    assert udp.len == 108 and udp.chksum == 0
    assert bytes(udp.payload) == b"p" * 100


def test_control_packets_go_out_not_ect_with_their_own_dscp():
    packet = IP(ipv4_udp_header(_datagram(SRC4, DST4, b"", dscp=46, ecn=ECN_NOT_ECT)))
    assert packet.tos == 46 << 2


def test_ipv6_header_carries_traffic_class_and_the_evs_flow_label():
    datagram = _datagram(SRC6, DST6, b"q" * 33, dscp=5, ecn=ECN_ECT0, flow_label=0xBEEF)
    packet = IPv6(ipv6_udp_header(datagram) + datagram.payload)
    assert packet.tc == (5 << 2) | ECN_ECT0
    assert packet.fl == 0xBEEF
    assert packet.nh == 17 and packet.hlim == 64 and packet.plen == 8 + 33
    assert (packet.src, packet.dst) == ("fd00::1", "fd00::2")
    assert packet[UDP].sport == 0xC123 and packet[UDP].dport == ROCEV2_UDP_PORT


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=1500), st.integers(1, 0xFFFF))
def test_ipv6_udp_checksum_matches_scapys_for_any_payload(payload, src_port):
    datagram = _datagram(SRC6, DST6, payload, src_port=src_port)
    ours = IPv6(ipv6_udp_header(datagram) + payload)[UDP].chksum
    reference = IPv6(src="fd00::1", dst="fd00::2") / UDP(sport=src_port, dport=4791) / payload
    assert ours == IPv6(bytes(reference))[UDP].chksum


def test_an_ipv6_checksum_that_folds_to_zero_is_sent_as_all_ones():
    # RFC 768: a computed 0 is transmitted as 0xFFFF (0 would mean "no checksum").
    header = struct.pack(">HHHH", 1, 1, 8, 0)
    assert udp6_checksum(SRC6, DST6, header, b"") != 0
    for word in range(0x10000):
        payload = word.to_bytes(2, "big")
        checksum = udp6_checksum(SRC6, DST6, struct.pack(">HHHH", 1, 1, 10, 0), payload)
        assert 1 <= checksum <= 0xFFFF
        if checksum == 0xFFFF:
            return
    pytest.fail("no payload folded to zero")


def test_ipv4_ancillary_data_gives_tos_and_header_destination():
    pktinfo = struct.pack("=i4s4s", 3, bytes([10, 0, 0, 9]), DST4)
    ancillary = [
        (socket.IPPROTO_IP, socket.IP_TOS, bytes([0x13])),
        (socket.IPPROTO_IP, IP_PKTINFO, pktinfo),
    ]
    assert parse_ancillary_v4(ancillary) == (0x13, DST4)


def test_ipv4_ancillary_data_without_pktinfo_has_no_destination():
    assert parse_ancillary_v4([(socket.IPPROTO_IP, socket.IP_TOS, bytes([3]))]) == (3, None)
    assert parse_ancillary_v4([(socket.IPPROTO_IP, IP_PKTINFO, b"\x00" * 6)]) == (0, None)


def test_ipv6_ancillary_data_gives_traffic_class_destination_and_flow_label():
    ancillary = [
        (socket.IPPROTO_IPV6, IPV6_TCLASS, struct.pack("=i", 0x12)),
        (socket.IPPROTO_IPV6, IPV6_PKTINFO, DST6 + struct.pack("=i", 2)),
        (socket.IPPROTO_IPV6, IPV6_FLOWINFO, struct.pack(">I", (0x12 << 20) | 0xBEEF)),
    ]
    assert parse_ancillary_v6(ancillary) == (0x12, DST6, 0xBEEF)


def test_ipv6_without_flowinfo_means_flow_label_zero():
    ancillary = [(socket.IPPROTO_IPV6, IPV6_PKTINFO, DST6 + b"\x00" * 4)]
    assert parse_ancillary_v6(ancillary) == (0, DST6, 0)


class _Socket:
    """Stands in for the raw socket: fails every send with ``error``."""

    def __init__(self, error: int) -> None:
        self.error = error

    def sendmsg(self, *_args: object) -> int:
        raise OSError(self.error, os.strerror(self.error))

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("error", "refused"), [(errno.EAGAIN, True), (errno.ENOBUFS, True), (errno.EMSGSIZE, False)]
)
def test_a_full_buffer_asks_to_retry_while_other_send_errors_are_counted(error, refused):
    sender = RawSender()
    sender._v4 = _Socket(error)  # type: ignore[assignment]
    accepted = sender.send(_datagram(SRC4, DST4, b"x"))
    assert accepted is not refused
    assert sender.send_errors == ({} if refused else {"EMSGSIZE": 1})


def test_an_oversized_datagram_is_warned_about_once_with_a_hint(caplog):
    sender = RawSender()
    sender._v4 = _Socket(errno.EMSGSIZE)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="agent.io.raw_sender"):
        for _ in range(3):
            sender.send(_datagram(SRC4, DST4, b"x" * 4000))
    assert sender.send_errors == {"EMSGSIZE": 3}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "--payload" in warnings[0] and "4008-byte" in warnings[0]
