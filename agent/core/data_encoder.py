"""The sender's data path encoder: data packet fields straight to MRC datagram bytes.

``agent.core.codec.encode`` takes a ``DataPacket`` and is the reference; this module produces
byte-identical output (the tests cross-check them) without building a ``DataPacket``, without
copying the payload more than once, and with everything that is fixed for a connection's path
(addresses, QP, P_Key, IP version) bound once. It exists because the sender pays it for
every packet: the per-packet Python work is most of what a sending agent does, and this cuts
three allocations and two payload copies per packet.

The ICRC (see ``agent.core.icrc``) is CRC-32 over the masked IP/UDP pseudo-header, the BTH
with its reserved byte masked, the extension headers and the payload. It is computed in
pieces, so the payload is read in place (a ``memoryview`` of the message) and copied exactly
once, into the finished packet; the pieces that are the same for every packet of an opcode
on one EV (the pseudo-header and the start of the BTH) are CRC'd once, and their CRC seeds
the rest (see ``DataPacketEncoder``).

What is produced is the MRC datagram, BTH through ICRC (the UDP payload): the IP and UDP
headers in front of it are the I/O layer's (``agent.io.raw_sender``).
"""

from __future__ import annotations

import struct
from typing import Final

from agent.core.crc import crc32
from agent.core.datagram import IpContext
from agent.core.icrc import pseudo_header_crc
from agent.core.packets import DEFAULT_PKEY
from wire.constants import (
    BTH_FLAG_ACKREQ,
    BTH_FLAG_RTX,
    BTH_FLAG_TS,
    ICRC_LEN,
    ROCEV2_UDP_PORT,
)

#: A data packet's headers from BTH byte 8 on (flags and PSN, METH, TSETH, RETH[, IMM]): the
#: part that changes from packet to packet. Bytes 0-7 (opcode, flags byte, P_Key, reserved,
#: destination QP) are fixed for an opcode on a connection and are prebuilt.
_REST: Final = struct.Struct(">IHHHHQII")
_REST_IMM: Final = struct.Struct(">IHHHHQIII")
#: BTH bytes 0-7 and the rest of the headers, as ``encode_into`` writes them in one
#: ``pack_into``.
_HEAD: Final = struct.Struct(">8s" + _REST.format[1:])
_HEAD_IMM: Final = struct.Struct(">8s" + _REST_IMM.format[1:])
_ICRC: Final = struct.Struct("<I")
_U24: Final = 0xFFFFFF
_UDP_HEADER_LEN: Final = 8
_BTH_FIXED_LEN: Final = 8
_BTH_RESERVED_OFFSET: Final = 4
#: Most bytes a data packet's MRC datagram has beyond its payload (BTH, METH, TSETH, RETH,
#: immediate, ICRC), rounded up: whether a packet of ``mss`` payload fits a send slot.
MAX_DATA_OVERHEAD: Final = 64
#: UDP length of a data packet less its payload, without and with the immediate.
_UDP_FIXED: Final = _UDP_HEADER_LEN + _BTH_FIXED_LEN + _REST.size + ICRC_LEN
_UDP_FIXED_IMM: Final = _UDP_HEADER_LEN + _BTH_FIXED_LEN + _REST_IMM.size + ICRC_LEN
#: BTH byte 8 (flags) as the top byte of the flags-and-PSN word; every data packet is
#: timestamped (TSETH), as the sender needs the echo for RTT samples and NACK matching.
_ACK_REQ_WORD: Final = BTH_FLAG_ACKREQ << 24
_RTX_WORD: Final = BTH_FLAG_RTX << 24
_TS_WORD: Final = BTH_FLAG_TS << 24
#: Distinct (opcode, source port, length) ICRC seeds kept before the table is cleared: a
#: connection's 256 EVs times a few opcodes and lengths need a few thousand at most.
MAX_SEEDS = 8192


class DataPacketEncoder:
    """Encodes timestamped data packets to one peer QP over one IP path (a plane).

    The ICRC's first 53 (IPv4) or 73 (IPv6) bytes, the masked IP/UDP pseudo-header and BTH
    bytes 0-7, depend only on the opcode, the source port (the EV) and the packet's length,
    all else being fixed for the path: their CRC is computed once per such triple and used
    as the seed for the rest, which leaves two ``crc32`` calls per packet, over the 28 or 32
    header bytes that change and over the payload.
    """

    __slots__ = ("_dest_qp", "_ip", "_pkey", "_prefixes", "_seeds", "ipv6")

    def __init__(self, ip: IpContext, dest_qp: int, pkey: int = DEFAULT_PKEY) -> None:
        if not 0 <= dest_qp <= _U24:
            raise ValueError(f"dest_qp {dest_qp} does not fit in 24 bits")
        self._ip = ip
        self._dest_qp = dest_qp
        self._pkey = pkey
        #: Whether the path is IPv6 (the I/O layer may take only IPv4 packets in place).
        self.ipv6 = len(ip.src) == 16
        #: opcode -> BTH bytes 0-7 as sent (reserved byte 0).
        self._prefixes: dict[int, bytes] = {}
        #: (opcode << 40 | src_port << 24 | UDP length) -> CRC of the pseudo-header and the
        #: BTH's first 8 bytes as the ICRC sees them (reserved byte 4 masked to ones).
        self._seeds: dict[int, int] = {}

    def _prefix(self, opcode: int) -> bytes:
        prefix = self._prefixes.get(opcode)
        if prefix is None:
            prefix = bytes((opcode, 0)) + self._pkey.to_bytes(2, "big") + b"\0"
            prefix += self._dest_qp.to_bytes(3, "big")
            self._prefixes[opcode] = prefix
        return prefix

    def _seed(self, key: int, opcode: int, src_port: int, udp_length: int) -> int:
        """The CRC of everything the ICRC covers before BTH byte 8 (see the class doc)."""
        bth_start = self._prefix(opcode)[:_BTH_RESERVED_OFFSET]
        pseudo = pseudo_header_crc(self._ip, src_port, ROCEV2_UDP_PORT, udp_length, bth_start)
        seed = crc32(self._dest_qp.to_bytes(3, "big"), pseudo)
        seeds = self._seeds
        if len(seeds) >= MAX_SEEDS:
            seeds.clear()
        seeds[key] = seed
        return seed

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
        word = _TS_WORD | psn
        if ack_req:
            word |= _ACK_REQ_WORD
        if retransmit:
            word |= _RTX_WORD
        if immediate is None:
            rest = _REST.pack(word, rqmsn, msn, tx_timestamp, 0, va, rkey, dma_length)
            udp_length = _UDP_FIXED + len(payload)
        else:
            rest = _REST_IMM.pack(
                word, rqmsn, msn, tx_timestamp, 0, va, rkey, dma_length, immediate
            )
            udp_length = _UDP_FIXED_IMM + len(payload)
        key = (opcode << 40) | (src_port << 24) | udp_length
        seed = self._seeds.get(key)
        if seed is None:
            seed = self._seed(key, opcode, src_port, udp_length)
        prefix = self._prefixes[opcode]
        crc = crc32(payload, crc32(rest, seed))
        return b"".join((prefix, rest, payload, _ICRC.pack(crc)))

    def encode_into(
        self,
        buffer: memoryview,
        offset: int,
        opcode: int,
        psn: int,
        msn: int,
        rqmsn: int,
        va: int,
        rkey: int,
        dma_length: int,
        payload: memoryview,
        immediate: int | None,
        tx_timestamp: int,
        ack_req: bool,
        retransmit: bool,
        src_port: int,
    ) -> int:
        """``encode``'s bytes written at ``offset`` of ``buffer`` (a send slot, see
        ``agent.core.send_slots``); returns their length.

        One ``pack_into`` writes every header, the payload is copied once, from the message
        to the buffer: no intermediate ``bytes`` per packet.
        """
        word = _TS_WORD | psn
        if ack_req:
            word |= _ACK_REQ_WORD
        if retransmit:
            word |= _RTX_WORD
        size = len(payload)
        udp_length = (_UDP_FIXED if immediate is None else _UDP_FIXED_IMM) + size
        key = (opcode << 40) | (src_port << 24) | udp_length
        seed = self._seeds.get(key)
        if seed is None:
            seed = self._seed(key, opcode, src_port, udp_length)  # also makes the prefix
        if immediate is None:
            rest_end = offset + _HEAD.size
            _HEAD.pack_into(
                buffer, offset, self._prefixes[opcode],
                word, rqmsn, msn, tx_timestamp, 0, va, rkey, dma_length,
            )  # fmt: skip
        else:
            rest_end = offset + _HEAD_IMM.size
            _HEAD_IMM.pack_into(
                buffer, offset, self._prefixes[opcode],
                word, rqmsn, msn, tx_timestamp, 0, va, rkey, dma_length, immediate,
            )  # fmt: skip
        end = rest_end + size
        buffer[rest_end:end] = payload
        # The ICRC's per-packet headers and the payload now lie side by side: one crc32.
        _ICRC.pack_into(buffer, end, crc32(buffer[offset + _BTH_FIXED_LEN : end], seed))
        return end + ICRC_LEN - offset
