"""The sender's data path encoder: data packet fields straight to UDP payload bytes.

``agent.core.codec.encode`` takes a ``DataPacket`` and is the reference; this module produces
byte-identical output (the tests cross-check them) without building a ``DataPacket``, without
copying the payload more than once, and with everything that is fixed for a connection's path
(addresses, QP, P_Key, IP version) bound once. It exists because the sender pays it for
every packet: the benchmark's sender spent most of its time in per-packet Python work, and
this cuts three allocations and two payload copies per packet.

The ICRC (see ``agent.core.icrc``) is CRC-32 over the masked IP/UDP pseudo-header, the BTH
with its reserved byte masked, the extension headers and the payload. It is computed in
pieces, so the payload is read in place (a ``memoryview`` of the message) and copied exactly
once, into the finished packet.
"""

from __future__ import annotations

import struct
import zlib

from agent.core.datagram import IpContext
from agent.core.icrc import V4_PSEUDO, V6_FIRST_WORD_MASKED, V6_PSEUDO
from agent.core.packets import DEFAULT_PKEY
from agent.wire.constants import (
    BTH_FLAG_ACKREQ,
    BTH_FLAG_RTX,
    BTH_FLAG_TS,
    ICRC_LEN,
    ROCEV2_UDP_PORT,
)

_DATA_TS = struct.Struct(">BBHIIHHHHQII")  # BTH METH TSETH RETH
_DATA_TS_IMM = struct.Struct(">BBHIIHHHHQIII")  # BTH METH TSETH RETH IMM
_ICRC = struct.Struct("<I")
_ONES_8 = b"\xff" * 8
_U24 = 0xFFFFFF
_UDP_HEADER_LEN = 8
_IPV4_HEADER_LEN = 20
_IP_PROTO_UDP = 17
_BTH_RESERVED_OFFSET = 4
#: BTH byte 8 (flags) | PSN, for each (ack_req, retransmit) pair; every data packet is
#: timestamped (TSETH), as the sender needs the echo for RTT samples and NACK matching.
_FLAG_WORDS = {
    (ack_req, retransmit): (
        BTH_FLAG_TS | (BTH_FLAG_ACKREQ if ack_req else 0) | (BTH_FLAG_RTX if retransmit else 0)
    )
    << 24
    for ack_req in (False, True)
    for retransmit in (False, True)
}


class DataPacketEncoder:
    """Encodes timestamped data packets to one peer QP over one IP path (a plane)."""

    __slots__ = ("_dest_qp", "_ip", "_pkey", "_v6")

    def __init__(self, ip: IpContext, dest_qp: int, pkey: int = DEFAULT_PKEY) -> None:
        if not 0 <= dest_qp <= _U24:
            raise ValueError(f"dest_qp {dest_qp} does not fit in 24 bits")
        self._ip = ip
        self._dest_qp = dest_qp
        self._pkey = pkey
        self._v6 = len(ip.src) == 16

    def encode(
        self,
        opcode: int,
        psn: int,
        msn: int,
        rqmsn: int,
        va: int,
        rkey: int,
        dma_length: int,
        payload: bytes | memoryview,
        immediate: int | None,
        tx_timestamp: int,
        ack_req: bool,
        retransmit: bool,
        src_port: int,
    ) -> bytes:
        """The UDP payload (BTH through ICRC) of one data packet leaving from ``src_port``.

        ``immediate`` must be given exactly for the *_IMM opcodes (the sender's invariant;
        not checked here, the reference codec checks it).
        """
        word = _FLAG_WORDS[(ack_req, retransmit)] | psn
        pkey = self._pkey
        if immediate is None:
            header = _DATA_TS.pack(
                opcode, 0, pkey, self._dest_qp, word, rqmsn, msn, tx_timestamp, 0, va, rkey,
                dma_length,
            )  # fmt: skip
        else:
            header = _DATA_TS_IMM.pack(
                opcode, 0, pkey, self._dest_qp, word, rqmsn, msn, tx_timestamp, 0, va, rkey,
                dma_length, immediate,
            )  # fmt: skip
        udp_length = _UDP_HEADER_LEN + len(header) + len(payload) + ICRC_LEN
        ip = self._ip
        if self._v6:
            pseudo = V6_PSEUDO.pack(
                _ONES_8, V6_FIRST_WORD_MASKED, udp_length, _IP_PROTO_UDP, 0xFF, ip.src, ip.dst,
                src_port, ROCEV2_UDP_PORT, udp_length, 0xFFFF, header[:_BTH_RESERVED_OFFSET],
                0xFF,
            )  # fmt: skip
        else:
            pseudo = V4_PSEUDO.pack(
                _ONES_8, 0x45, 0xFF, _IPV4_HEADER_LEN + udp_length, ip.ip_id, ip.flags_fragment,
                0xFF, _IP_PROTO_UDP, 0xFFFF, ip.src, ip.dst, src_port, ROCEV2_UDP_PORT,
                udp_length, 0xFFFF, header[:_BTH_RESERVED_OFFSET], 0xFF,
            )  # fmt: skip
        crc = zlib.crc32(header[_BTH_RESERVED_OFFSET + 1 :], zlib.crc32(pseudo))
        crc = zlib.crc32(payload, crc)
        return b"".join((header, payload, _ICRC.pack(crc)))
