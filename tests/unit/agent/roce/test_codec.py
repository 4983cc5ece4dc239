"""The RoCE codec: standard RoCEv2 bytes, round trips, and malformed input refused by reason."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.codec import DecodeError
from agent.core.datagram import IpContext
from agent.core.drops import DropReason
from agent.core.icrc import icrc_bytes
from agent.roce.codec import decode, encode, encode_body
from agent.roce.packets import RoceAck, RoceCnp, RoceData
from wire.constants import (
    AETH_CREDIT_INVALID,
    BTH_BECN,
    CNP_RESERVED_LEN,
    ICRC_LEN,
    ROCEV2_UDP_PORT,
    AethSyndrome,
    RoceOpcode,
)

IP4 = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))
IP6 = IpContext(src=bytes(15) + b"\x01", dst=bytes(15) + b"\x02")
PORT = 0xC321


def _roundtrip(packet, ip=IP4):
    return decode(encode(packet, ip, PORT), ip, PORT, ROCEV2_UDP_PORT)


@pytest.mark.parametrize("ip", [IP4, IP6], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize(
    "packet",
    [
        RoceData(RoceOpcode.RC_RDMA_WRITE_FIRST, 7, 5, b"a" * 1024, False, 0x1000, 0x55, 3000),
        RoceData(RoceOpcode.RC_RDMA_WRITE_MIDDLE, 7, 6, b"b" * 1024),
        RoceData(RoceOpcode.RC_RDMA_WRITE_LAST, 7, 7, b"c" * 952, True),
        RoceData(RoceOpcode.RC_RDMA_WRITE_LAST_IMM, 7, 8, b"d" * 3, True, immediate=9),
        RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY, 7, 0xFFFFFF, b"", True, 1 << 63, 1, 0),
        RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM, 7, 1, b"xyz", True, 5, 6, 3, 0xBEEF, True),
        RoceAck(7, 100, AethSyndrome.ACK | AETH_CREDIT_INVALID, 12),
        RoceAck(0xFFFFFF, 100, AethSyndrome.NAK_PSN_SEQUENCE_ERROR, 0xFFFFFF),
        RoceCnp(0x123456),
    ],
    ids=lambda p: type(p).__name__ + (f"-{p.opcode:#x}" if isinstance(p, RoceData) else ""),
)
def test_every_packet_kind_round_trips_over_ipv4_and_ipv6(packet, ip):
    assert _roundtrip(packet, ip) == packet


def test_the_bth_is_roces_byte_for_byte():
    packet = RoceData(RoceOpcode.RC_RDMA_WRITE_FIRST, 0xABCDEF, 0x123456, b"p" * 8, True, 1, 2, 8)
    body = encode_body(packet)
    assert body[0] == 0x06 and body[1] == 0  # SE 0, MigReq 0, pad 0, TVer 0
    assert body[2:4] == b"\xff\xff" and body[4] == 0
    assert body[5:8] == bytes.fromhex("abcdef")
    assert body[8] == 0x80 and body[9:12] == bytes.fromhex("123456")  # AckReq, PSN
    assert body[12:28] == struct.pack(">QII", 1, 2, 8)  # RETH right after the BTH


def test_a_payload_is_padded_to_four_bytes_and_the_pad_count_says_so():
    packet = RoceData(RoceOpcode.RC_RDMA_WRITE_LAST, 1, 2, b"12345", True)
    body = encode_body(packet)
    assert (body[1] >> 4) & 3 == 3
    assert body[12:] == b"12345" + bytes(3)
    assert _roundtrip(packet).payload == b"12345"


def test_a_cnp_is_a_bth_with_becn_and_sixteen_reserved_bytes():
    body = encode_body(RoceCnp(0x42))
    assert body[0] == RoceOpcode.CNP and body[4] == BTH_BECN
    assert body[5:8] == b"\x00\x00\x42"
    assert body[12:] == bytes(CNP_RESERVED_LEN)


def test_the_icrc_is_the_one_mrc_uses():
    packet = RoceAck(3, 4, AethSyndrome.ACK, 5)
    body = encode_body(packet)
    assert encode(packet, IP4, PORT) == body + icrc_bytes(body, IP4, PORT, ROCEV2_UDP_PORT)


def test_encoding_refuses_what_no_packet_can_carry():
    with pytest.raises(ValueError, match="immediate"):
        encode_body(RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY_IMM, 1, 2, b""))
    with pytest.raises(ValueError, match="immediate"):
        encode_body(RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY, 1, 2, b"", immediate=1))
    with pytest.raises(ValueError, match="not a RoCE"):
        encode_body(RoceData(0xCA, 1, 2, b""))
    with pytest.raises(ValueError, match="24 bits"):
        encode_body(RoceData(RoceOpcode.RC_RDMA_WRITE_MIDDLE, 1 << 24, 2, b""))


def _reason(datagram: bytes) -> DropReason:
    with pytest.raises(DecodeError) as info:
        decode(datagram, IP4, PORT, ROCEV2_UDP_PORT)
    return info.value.reason


def _with_icrc(body: bytes) -> bytes:
    return body + icrc_bytes(body, IP4, PORT, ROCEV2_UDP_PORT)


def test_malformed_input_is_refused_with_its_reason():
    good = encode(RoceData(RoceOpcode.RC_RDMA_WRITE_ONLY, 1, 2, b"data", True, 0, 1, 4), IP4, PORT)
    assert _reason(good[:10]) is DropReason.TRUNCATED
    corrupted = bytearray(good)
    corrupted[-ICRC_LEN - 1] ^= 1
    assert _reason(bytes(corrupted)) is DropReason.BAD_ICRC
    assert _reason(_with_icrc(bytes([0x04]) + good[1:-ICRC_LEN])) is DropReason.UNKNOWN_OPCODE
    assert _reason(_with_icrc(bytes([0xCA]) + good[1:-ICRC_LEN])) is DropReason.UNKNOWN_OPCODE
    tver = bytearray(good[:-ICRC_LEN])
    tver[1] |= 0x01
    assert _reason(_with_icrc(bytes(tver))) is DropReason.BAD_FIELD
    # a FIRST without room for its RETH; an ACK and a CNP of the wrong length
    short_first = bytes([RoceOpcode.RC_RDMA_WRITE_FIRST]) + good[1:12] + bytes(8)
    assert _reason(_with_icrc(short_first)) is DropReason.TRUNCATED
    ack = encode_body(RoceAck(1, 2, 0, 3))
    assert _reason(_with_icrc(ack + b"\0\0\0\0")) is DropReason.BAD_FIELD
    cnp = encode_body(RoceCnp(1))
    assert _reason(_with_icrc(cnp[:-1])) is DropReason.BAD_FIELD
    # a pad count larger than the payload
    padded = bytearray(encode_body(RoceData(RoceOpcode.RC_RDMA_WRITE_MIDDLE, 1, 2, b"")))
    padded[1] |= 0x30
    assert _reason(_with_icrc(bytes(padded))) is DropReason.BAD_FIELD


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from([0x06, 0x07, 0x0A, 0x0B, 0x11, 0x81, 0x42]))
def test_any_bytes_decode_or_are_refused_never_anything_else(noise, opcode):
    body = bytes([opcode]) + noise
    for datagram in (noise, _with_icrc(body) if len(body) > 4 else body):
        with contextlib.suppress(DecodeError):
            decode(datagram, IP4, PORT, ROCEV2_UDP_PORT)
