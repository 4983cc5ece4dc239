"""The ICRC: computed on build, RoCEv2's definition bit for bit, checked on receive."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib import roce
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from wire.constants import BTH_LEN, ICRC_LEN, ROCEV2_UDP_PORT, NackReason
from wire.frames import DEFAULT_DST_MAC, DEFAULT_SRC_MAC, Envelope, mrc_data_packet, mrc_nack
from wire.icrc import compute_icrc, icrc_from_bytes, icrc_is_valid, icrc_to_bytes
from wire.layers import MrcBTH, MrcRETH, icrc_matches

ETHER_LEN = 14


def ip_datagram(frame) -> bytes:
    """The IP datagram of a frame, as bytes."""
    return bytes(frame)[ETHER_LEN:]


def scapy_contrib_icrc(frame) -> bytes:
    """The ICRC scapy's own RoCEv2 layer computes for the same bytes after the UDP header."""
    wire = Ether(bytes(frame))
    after_bth = bytes(wire[MrcBTH])[BTH_LEN:-ICRC_LEN]
    bth_byte8 = bytes(wire[MrcBTH])[8]
    ip = wire[IP] if wire.haslayer(IP) else wire[IPv6]
    header = ip.copy()
    header.remove_payload()
    standard = (
        header
        / UDP(sport=wire[UDP].sport, dport=ROCEV2_UDP_PORT)
        / roce.BTH(
            opcode=wire[MrcBTH].opcode,
            dqpn=wire[MrcBTH].dqpn,
            psn=wire[MrcBTH].psn,
            ackreq=bth_byte8 >> 7,
            resv7=bth_byte8 & 0x7F,
        )
        / Raw(after_bth)
    )
    return bytes(standard)[-ICRC_LEN:]


def test_icrc_equals_what_scapys_rocev2_layer_computes_for_every_kind(frames_by_kind):
    for kind, frame in frames_by_kind.items():
        assert bytes(frame)[-ICRC_LEN:] == scapy_contrib_icrc(frame), kind


def test_every_built_packet_carries_a_valid_icrc(frames_by_kind):
    for kind, frame in frames_by_kind.items():
        assert icrc_matches(frame), kind
        assert icrc_matches(Ether(bytes(frame))), kind
        assert icrc_is_valid(ip_datagram(frame)), kind


def test_icrc_field_value_is_the_crc_and_goes_on_the_wire_least_significant_byte_first(
    frames_by_kind,
):
    frame = frames_by_kind["write_only"]
    wire = bytes(frame)
    value = Ether(wire)[MrcBTH].icrc
    assert value == compute_icrc(wire[ETHER_LEN:])
    assert wire[-ICRC_LEN:] == value.to_bytes(4, "little") == icrc_to_bytes(value)
    assert icrc_from_bytes(wire[-ICRC_LEN:]) == value


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_corrupted_covered_byte_is_detected(data):
    version = data.draw(st.sampled_from([4, 6]))
    envelope = (
        Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0x1234_0000)
        if version == 4
        else Envelope(src_ip="fd00::1", dst_ip="fd00::2", ev=0x1234_5678)
    )
    payload = data.draw(st.binary(min_size=1, max_size=200))
    wire = bytearray(bytes(mrc_data_packet(envelope, dqpn=3, psn=9, payload=payload)))
    datagram_start = ETHER_LEN
    header_len = 20 if version == 4 else 40
    masked = (
        {1, 8, 10, 11} if version == 4 else {1, 2, 3, 7}
    )  # TOS/TTL/checksum; TC/flow label/hop limit
    masked |= {header_len + 6, header_len + 7, header_len + 8 + 4}  # UDP checksum, BTH resv8
    covered = [
        offset
        for offset in range(len(wire) - datagram_start - ICRC_LEN)
        if offset not in masked and not (version == 6 and offset == 0)
    ]
    offset = data.draw(st.sampled_from(covered))
    flip = data.draw(st.integers(1, 255))
    wire[datagram_start + offset] ^= flip
    assert not icrc_is_valid(bytes(wire[datagram_start:]))


def test_a_corrupted_payload_fails_the_check_on_the_dissected_packet(envelope):
    wire = bytearray(bytes(mrc_data_packet(envelope, dqpn=3, psn=9, payload=b"abcdef")))
    wire[-ICRC_LEN - 1] ^= 0x01
    assert not icrc_matches(Ether(bytes(wire)))


def test_a_corrupted_icrc_fails_the_check(envelope):
    wire = bytearray(bytes(mrc_data_packet(envelope, dqpn=3, psn=9, payload=b"abcdef")))
    wire[-1] ^= 0x80
    assert not icrc_matches(Ether(bytes(wire)))


def test_editing_a_dissected_packet_is_checked_against_the_new_contents(envelope):
    dissected = Ether(bytes(mrc_data_packet(envelope, dqpn=3, psn=9, payload=b"abcdef")))
    dissected[MrcRETH].rkey ^= 1
    assert not icrc_matches(dissected)


def test_what_routers_rewrite_in_flight_leaves_the_icrc_valid(envelope):
    frame = Ether(bytes(mrc_data_packet(envelope, dqpn=3, psn=9, payload=b"abcdef")))
    if frame.haslayer(IP):
        frame[IP].ttl -= 1
        frame[IP].tos = (5 << 2) | 3  # re-marked DSCP, CE
        frame[IP].chksum = None
    else:
        frame[IPv6].hlim -= 1
        frame[IPv6].tc = (5 << 2) | 3
        frame[IPv6].fl ^= 0xF0000
    frame[UDP].chksum = 0
    frame[MrcBTH].resv8 = 0xC0  # FECN/BECN in RoCE
    assert icrc_is_valid(ip_datagram(frame))


def test_ethernet_padding_after_a_short_packet_does_not_spoil_the_check(envelope):
    frame = mrc_nack(envelope, dqpn=1, psn=2, nack_psn=3, reason=NackReason.TRIMMED, entropy=4)
    padded = Ether(bytes(frame) + b"\x00" * 30)
    assert icrc_matches(padded)


def test_checking_a_packet_without_a_bth_is_a_clear_error():
    with pytest.raises(ValueError, match="no BTH layer"):
        icrc_matches(Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC) / IP() / UDP(dport=53))


def test_building_a_bth_without_ip_and_udp_around_it_asks_for_an_explicit_icrc():
    with pytest.raises(ValueError, match="icrc= explicitly"):
        bytes(MrcBTH())
    assert bytes(MrcBTH(icrc=0x11223344))[-ICRC_LEN:] == bytes.fromhex("44332211")


@pytest.mark.parametrize(
    ("datagram", "message"),
    [
        (b"", "empty"),
        (bytes([0x55]) + bytes(70), "IP version 5"),
        (bytes([0x41]) + bytes(70), "below the minimum"),
        (bytes([0x45]) + bytes(20), "shorter than"),
        (bytes(IP(proto=6) / Raw(bytes(40))), "needs UDP"),
    ],
)
def test_compute_icrc_refuses_what_cannot_be_a_rocev2_datagram(datagram, message):
    with pytest.raises(ValueError, match=message):
        compute_icrc(datagram)


def test_icrc_from_bytes_wants_exactly_four_bytes():
    with pytest.raises(ValueError, match="4 bytes"):
        icrc_from_bytes(b"\x00\x01")


def test_a_datagram_that_is_not_rocev2_at_all_is_simply_not_valid():
    assert not icrc_is_valid(bytes(IP(proto=6) / Raw(bytes(40))))
    assert not icrc_is_valid(b"")


def test_under_an_srv6_outer_header_the_icrc_covers_the_inner_ipv6_header_only():
    inner = mrc_data_packet(
        Envelope(src_ip="fd00:1::1", dst_ip="fd00:2::2", ev=0xAAAA_BBBB),
        dqpn=1,
        psn=2,
        payload=b"routed by segment list",
    )
    outer = IPv6(src="fd00:9::1", dst="fcbb:bb00:1:2::")
    encapsulated = Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC) / outer / inner[IPv6]
    wire = Ether(bytes(encapsulated))
    assert wire[MrcBTH].icrc == Ether(bytes(inner))[MrcBTH].icrc
    wire[IPv6].dst = "fcbb:bb00:2::"  # a switch shifts the uSID list
    assert icrc_matches(Ether(bytes(wire)))
