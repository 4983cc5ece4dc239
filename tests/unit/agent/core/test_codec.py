"""The fast codec: exact round trips for every packet kind, RoCEv2 ICRC bit-for-bit equal to
scapy's, trimmed headers, and a clear DecodeError (never another exception) for bad bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from agent.core.codec import (
    DecodeError,
    data_packet_fields,
    decode,
    decode_whole_data_fields,
    encode,
    encode_body,
    trimmed_length,
)
from agent.core.datagram import IpContext
from agent.core.drops import DropReason
from agent.core.packets import DataPacket, EndpointMessage, SackPacket, TrimmedDataHeader
from tests.unit.agent.core.strategies import (
    any_packets,
    data_packets,
    ip_contexts,
    ipv4_contexts,
    ipv6_contexts,
    u16,
)
from wire.constants import (
    BTH_LEN,
    EPH_LEN,
    ICRC_LEN,
    MAX_EV_PROBE_ANSWERS,
    ROCEV2_UDP_PORT,
    EpType,
    Opcode,
)

V4 = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))


@settings(max_examples=150, deadline=None)
@given(packet=any_packets, ip=ip_contexts, src_port=u16)
def test_every_packet_kind_round_trips_exactly(packet, ip, src_port):
    wire = encode(packet, ip, src_port)
    assert decode(wire, ip, src_port) == packet


@settings(max_examples=150, deadline=None)
@given(packet=data_packets(), ip=ip_contexts, src_port=u16)
def test_the_receive_paths_data_fields_are_the_decoded_packets_fields(packet, ip, src_port):
    """The per-packet receive path takes a data packet as a tuple, not a DataPacket: the
    same fields, in DataPacket's order after the opcode (its two BTH flags aside)."""
    wire = encode(packet, ip, src_port)
    fields = decode_whole_data_fields(wire, len(wire), wire[0], ip, src_port, ROCEV2_UDP_PORT)
    p = decode(wire, ip, src_port)
    assert isinstance(p, DataPacket)
    assert fields == (
        p.dest_qp, p.psn, p.msn, p.rqmsn, p.va, p.rkey, p.dma_length, p.payload,
        p.immediate, p.tx_timestamp, p.ts_flags, p.pkey,
    )  # fmt: skip
    assert data_packet_fields(p) == fields
    corrupt = bytearray(wire)
    corrupt[-1] ^= 1
    with pytest.raises(DecodeError) as refused:
        decode_whole_data_fields(bytes(corrupt), len(wire), wire[0], ip, src_port, ROCEV2_UDP_PORT)
    assert refused.value.reason is DropReason.BAD_ICRC


@settings(max_examples=60, deadline=None)
@given(header=data_packets(trimmed=True), ip=ip_contexts, src_port=u16)
def test_trimmed_data_header_decodes_when_the_dscp_says_trimmed(header, ip, src_port):
    wire = encode(header, ip, src_port)
    assert decode(wire, ip, src_port, trimmed=True) == header
    assert trimmed_length(wire + b"tail the switch left") == len(wire)


@settings(max_examples=40, deadline=None)
@given(packet=data_packets(), ip=ip_contexts, src_port=u16)
def test_cutting_a_data_packet_at_trimmed_length_leaves_its_headers(packet, ip, src_port):
    wire = encode(packet, ip, src_port)
    cut = wire[: trimmed_length(wire)]
    header = decode(cut, ip, src_port, trimmed=True)
    assert isinstance(header, TrimmedDataHeader)
    assert (header.psn, header.msn, header.va, header.rkey, header.immediate) == (
        packet.psn,
        packet.msn,
        packet.va,
        packet.rkey,
        packet.immediate,
    )


def _scapy_icrc(body: bytes, ip: IpContext, src_port: int, tos: int, ttl: int) -> bytes:
    """ICRC computed by scapy's contrib RoCE BTH over the same bytes and headers."""
    udp = UDP(sport=src_port, dport=ROCEV2_UDP_PORT, chksum=0x1234)
    bth = BTH(body[:12] + b"\0\0\0\0")
    if ip.is_ipv6:
        outer = IPv6(src=_ip6(ip.src), dst=_ip6(ip.dst), tc=tos, fl=0x12345, hlim=ttl)
    else:
        flags, frag = ip.flags_fragment >> 13, ip.flags_fragment & 0x1FFF
        outer = IP(
            src=_ip4(ip.src), dst=_ip4(ip.dst), id=ip.ip_id, flags=flags, frag=frag, tos=tos,
            ttl=ttl,
        )  # fmt: skip
    bth.icrc = None
    frame = outer / udp / bth / Raw(body[12:])
    # scapy's BTH holds the ICRC as a trailer field; rebuild it so post_build computes it.
    built = bytes(frame)
    return built[-ICRC_LEN:]


def _ip4(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)


def _ip6(raw: bytes) -> str:
    return ":".join(f"{(raw[i] << 8) | raw[i + 1]:x}" for i in range(0, 16, 2))


@settings(max_examples=60, deadline=None)
@given(
    packet=any_packets,
    ip=ipv4_contexts,
    src_port=u16,
    tos=st.integers(0, 255),
    ttl=st.integers(1, 255),
)
def test_icrc_equals_scapy_compute_icrc_over_ipv4(packet, ip, src_port, tos, ttl):
    wire = encode(packet, ip, src_port)
    body = wire[:-ICRC_LEN]
    assert wire[-ICRC_LEN:] == _scapy_icrc(body, ip, src_port, tos, ttl)


@settings(max_examples=60, deadline=None)
@given(
    packet=any_packets,
    ip=ipv6_contexts,
    src_port=u16,
    tc=st.integers(0, 255),
    hlim=st.integers(1, 255),
)
def test_icrc_equals_scapy_compute_icrc_over_ipv6(packet, ip, src_port, tc, hlim):
    wire = encode(packet, ip, src_port)
    body = wire[:-ICRC_LEN]
    assert wire[-ICRC_LEN:] == _scapy_icrc(body, ip, src_port, tc, hlim)


def test_icrc_ignores_bth_byte_4_like_a_switch_rewriting_it():
    packet = SackPacket(dest_qp=7, psn=1, cack_psn=1, ack_psn_offset=0, entropy=9, bitmap=3)
    wire = bytearray(encode(packet, V4, 0xC001))
    wire[4] = 0xA5
    assert decode(bytes(wire), V4, 0xC001) == packet


@settings(max_examples=60, deadline=None)
@given(packet=any_packets, position=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_any_flipped_bit_outside_bth_byte_4_is_refused_as_bad_icrc_or_bad_field(
    packet, position, bit
):
    wire = bytearray(encode(packet, V4, 0xC001))
    position %= len(wire)
    if position == 4:
        position = 5
    wire[position] ^= 1 << bit
    with pytest.raises(DecodeError) as refused:
        decode(bytes(wire), V4, 0xC001)
    assert refused.value.reason in {
        DropReason.BAD_ICRC,
        DropReason.BAD_FIELD,
        DropReason.UNKNOWN_OPCODE,
        DropReason.TRUNCATED,
    }


@settings(max_examples=40, deadline=None)
@given(packet=any_packets, ip=ip_contexts, other=ip_contexts)
def test_icrc_binds_the_packet_to_its_ip_and_udp_headers(packet, ip, other):
    wire = encode(packet, ip, 0xC001)
    for context, port in ((other, 0xC001), (ip, 0xC002)):
        if context == ip and port == 0xC001:
            continue
        with pytest.raises(DecodeError) as refused:
            decode(wire, context, port)
        assert refused.value.reason == DropReason.BAD_ICRC


@settings(max_examples=80, deadline=None)
@given(junk=st.binary(max_size=200), trimmed=st.booleans())
def test_random_bytes_raise_only_decode_error(junk, trimmed):
    try:
        decode(junk, V4, 0xC001, trimmed=trimmed)
    except DecodeError as error:
        assert isinstance(error.reason, DropReason)


@settings(max_examples=40, deadline=None)
@given(packet=any_packets, keep=st.integers(0, 60))
def test_truncated_packets_are_refused(packet, keep):
    wire = encode(packet, V4, 0xC001)
    if keep >= len(wire):
        return
    with pytest.raises(DecodeError):
        decode(wire[:keep], V4, 0xC001)


def test_unknown_opcode_is_reported_as_such():
    body = struct.pack(">BBHII", 0x42, 0, 0xFFFF, 5, 1)
    fake = DataPacket(Opcode.WRITE_ONLY, 5, 1, 0, 0, 0, 0, 0, b"")
    icrc = encode(fake, V4, 1)  # any valid trailer shape; the opcode check comes first
    with pytest.raises(DecodeError) as refused:
        decode(body + icrc[-ICRC_LEN:], V4, 1)
    assert refused.value.reason == DropReason.UNKNOWN_OPCODE


def test_unknown_endpoint_request_type_is_a_bad_field():
    body = struct.pack(">BBHIIBBHI", Opcode.EP_REQUEST, 0, 0xFFFF, 5, 0, 99, 0, 1, 2)
    from agent.core.icrc import icrc_bytes

    with pytest.raises(DecodeError) as refused:
        decode(body + icrc_bytes(body, V4, 1, ROCEV2_UDP_PORT), V4, 1)
    assert refused.value.reason == DropReason.BAD_FIELD


def test_a_trimmed_dscp_on_a_control_packet_is_a_bad_field():
    wire = encode(SackPacket(1, 0, 0, 0, 0, 0), V4, 1)
    with pytest.raises(DecodeError) as refused:
        decode(wire, V4, 1, trimmed=True)
    assert refused.value.reason == DropReason.BAD_FIELD


def test_encoding_refuses_an_immediate_on_a_non_imm_opcode():
    with pytest.raises(ValueError, match="immediate"):
        encode_body(DataPacket(Opcode.WRITE_ONLY, 1, 0, 0, 0, 0, 0, 4, b"abcd", immediate=5))


def test_encoding_refuses_a_psn_wider_than_24_bits():
    with pytest.raises(ValueError, match="24 bits"):
        encode_body(DataPacket(Opcode.WRITE_ONLY, 1, 1 << 24, 0, 0, 0, 0, 0, b""))


def _signed(body: bytes) -> bytes:
    from agent.core.icrc import icrc_bytes

    return body + icrc_bytes(body, V4, 1, ROCEV2_UDP_PORT)


def test_an_ev_probe_response_round_trips_with_every_answer_it_carries():
    answers = tuple((seq, 0xC000_0000 + seq) for seq in range(1, MAX_EV_PROBE_ANSWERS))
    response = EndpointMessage(7, 0, True, EpType.EV_PROBE, 0, 0xC001_0000, more_answers=answers)
    wire = encode(response, V4, 0xC001)
    assert len(wire) == BTH_LEN + MAX_EV_PROBE_ANSWERS * EPH_LEN + ICRC_LEN
    assert decode(wire, V4, 0xC001) == response


@pytest.mark.parametrize(
    ("opcode", "ep_type", "extra"),
    [
        (Opcode.EP_RESPONSE, EpType.EV_PROBE, struct.pack(">BBHI", 1, 0, 2, 3)[:5]),  # partial
        (Opcode.EP_RESPONSE, EpType.EV_PROBE, struct.pack(">BBHI", EpType.PORT_STATUS, 0, 2, 3)),
        (Opcode.EP_RESPONSE, EpType.PORT_STATUS, struct.pack(">BBHI", 1, 0, 2, 3)),
        (Opcode.EP_REQUEST, EpType.EV_PROBE, struct.pack(">BBHI", 1, 0, 2, 3)),
        (
            Opcode.EP_RESPONSE,
            EpType.EV_PROBE,
            struct.pack(">BBHI", 1, 0, 2, 3) * MAX_EV_PROBE_ANSWERS,  # one answer too many
        ),
    ],
    ids=["partial EPH", "port status among answers", "answers on port status", "request",
         "too many"],
)  # fmt: skip
def test_anything_but_ev_probe_answers_after_an_eph_is_a_bad_field(opcode, ep_type, extra):
    body = struct.pack(">BBHIIBBHI", opcode, 0, 0xFFFF, 5, 0, ep_type, 0, 1, 2) + extra
    with pytest.raises(DecodeError) as refused:
        decode(_signed(body), V4, 1)
    assert refused.value.reason == DropReason.BAD_FIELD


@pytest.mark.parametrize(
    "message",
    [
        EndpointMessage(7, 0, False, EpType.EV_PROBE, 1, 2, more_answers=((3, 4),)),
        EndpointMessage(7, 0, True, EpType.PORT_STATUS, 1, 2, more_answers=((3, 4),)),
        EndpointMessage(
            7, 0, True, EpType.EV_PROBE, 1, 2, more_answers=((3, 4),) * MAX_EV_PROBE_ANSWERS
        ),
    ],
    ids=["request", "port status", "too many"],
)
def test_encoding_refuses_answers_a_response_cannot_carry(message):
    with pytest.raises(ValueError, match="answers"):
        encode_body(message)
