"""Malformed packets are dropped and counted by reason, never forwarded half-parsed, and the
switch keeps forwarding afterwards."""

from __future__ import annotations

import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.ptf.base import SWITCH_MAC, MrcPtfTest, host_mac
from tests.ptf.packets import DST_V4, DST_V6, HOST_MAC, mrc_data, roce_frame, routed
from wire.constants import RoceOpcode

DROP_PARSER_TOO_SHORT = 0
DROP_PARSER_BAD_IPV4 = 2
DROP_PARSER_BAD_OPCODE = 4
DROP_IPV4_CHECKSUM = 6


class MalformedTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=2, next_id=1)

    def assert_dropped_as(self, frame: bytes, reason: int) -> None:
        before = self.drop_reason_count(reason)
        tu.send_packet(self, 1, frame)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drop_reason_count(reason) - before, 1)
        # ... and the switch still forwards a good packet.
        good = Ether(bytes(mrc_data(SWITCH_MAC, psn=99, payload_len=64)))
        tu.send_packet(self, 1, good)
        tu.verify_packet(self, routed(good, SWITCH_MAC, host_mac(2)), 2)


def udp_headers_then(payload: bytes) -> bytes:
    return bytes(
        Ether(dst=SWITCH_MAC, src=HOST_MAC)
        / IP(src="10.0.1.1", dst=DST_V4)
        / UDP(sport=49152, dport=4791)
        / Raw(payload)
    )


class ShortBthIsDropped(MalformedTest):
    def runTest(self) -> None:
        self.assert_dropped_as(udp_headers_then(bytes([0xCA]) + b"\x00" * 5), DROP_PARSER_TOO_SHORT)


class TruncatedRethIsDropped(MalformedTest):
    def runTest(self) -> None:
        whole = bytes(mrc_data(SWITCH_MAC, payload_len=0))
        cut = len(whole) - 4 - 8  # ICRC and half the RETH gone
        self.assert_dropped_as(whole[:cut], DROP_PARSER_TOO_SHORT)


class BadIhlIsDropped(MalformedTest):
    def runTest(self) -> None:
        for ihl in (4, 6):
            frame = bytearray(bytes(mrc_data(SWITCH_MAC, payload_len=64)))
            frame[14] = 0x40 | ihl
            self.assert_dropped_as(bytes(frame), DROP_PARSER_BAD_IPV4)


class BadIpv4ChecksumIsDropped(MalformedTest):
    def runTest(self) -> None:
        frame = bytearray(bytes(mrc_data(SWITCH_MAC, payload_len=64)))
        frame[24] ^= 0xFF
        self.assert_dropped_as(bytes(frame), DROP_IPV4_CHECKSUM)


class TruncatedIpv6IsDropped(MalformedTest):
    def runTest(self) -> None:
        whole = bytes(mrc_data(SWITCH_MAC, version=6, payload_len=64))
        self.assert_dropped_as(whole[: 14 + 30], DROP_PARSER_TOO_SHORT)


class UnknownOpcodeIsDropped(MalformedTest):
    """Opcodes neither MRC nor the RoCE baseline uses stay dropped (the RC writes, ACK and CNP
    are forwarded: tests/ptf/tests/roce.py)."""

    def runTest(self) -> None:
        # RC SEND_ONLY, RDMA READ request and response, UD SEND_ONLY, a vendor code.
        for opcode in (0x04, 0x0C, 0x10, 0x64, 0xF0):
            frame = bytearray(bytes(mrc_data(SWITCH_MAC, payload_len=64)))
            frame[14 + 20 + 8] = opcode
            self.assert_dropped_as(bytes(frame), DROP_PARSER_BAD_OPCODE)


class TruncatedRoceHeadersAreDropped(MalformedTest):
    """A standard RoCE packet cut inside the headers its opcode carries is dropped as short."""

    def runTest(self) -> None:
        for op, keep in (
            (RoceOpcode.RC_RDMA_WRITE_FIRST, 8),  # half a RETH
            (RoceOpcode.RC_ACKNOWLEDGE, 2),  # half an AETH
            (RoceOpcode.CNP, 8),  # half the reserved bytes
        ):
            frame = bytes(roce_frame(SWITCH_MAC, op, payload_len=0))
            cut = 14 + 20 + 8 + 12 + keep
            self.assert_dropped_as(frame[:cut], DROP_PARSER_TOO_SHORT)
