"""RoCEv2's ICRC computed from an ``IpContext``, without building the IP datagram.

Same definition as ``wire.icrc`` (and scapy's ``contrib/roce.py``): CRC-32 over 8 bytes of
0xFF, the IP header with TOS/traffic class, TTL/hop limit, flow label and header checksum set to
ones, the UDP header with its checksum set to ones, and the MRC packet with BTH byte 4 set to
ones; stored least-significant byte first. This version packs the pseudo-header straight from
the context instead of masking a copy of a whole datagram, because it runs twice per packet on
the data path (once to send, once to check); the data path's encoder and decoder cache its CRC
(``pseudo_header_crc``) as the seed of each packet's ICRC.

The IPv4 header is taken to be the plain 20 bytes (no options), which is what the runtime sends.
"""

from __future__ import annotations

import struct
from typing import Final

from agent.core.crc import crc32
from agent.core.datagram import IpContext
from wire.constants import ICRC_LEN

_IP_PROTO_UDP: Final = 17
_UDP_HEADER_LEN: Final = 8
_IPV4_HEADER_LEN: Final = 20
_BTH_RESERVED_OFFSET: Final = 4
_ONES_8: Final = b"\xff" * 8
# pseudo-LRH, IPv4 header (masked), UDP header (checksum masked), BTH bytes 0-4 (4 masked)
_V4_PSEUDO: Final = struct.Struct(">8sBBHHHBBH4s4sHHHH4sB")
# pseudo-LRH, IPv6 header (traffic class, flow label, hop limit masked), UDP header, BTH 0-4
_V6_PSEUDO: Final = struct.Struct(">8sIHBB16s16sHHHH4sB")
_V6_FIRST_WORD_MASKED: Final = 0x6FFFFFFF
_ICRC: Final = struct.Struct("<I")


def pseudo_header_crc(
    ip: IpContext, src_port: int, dst_port: int, udp_length: int, bth_start: bytes
) -> int:
    """The CRC of everything the ICRC covers before BTH byte 5: the pseudo-LRH, the masked IP
    and UDP headers of a ``udp_length``-byte UDP datagram, BTH bytes 0-3 (``bth_start``) and
    the masked byte 4. The one place the pseudo-header is laid out: every ICRC, computed
    whole or continued from a cached seed, starts here."""
    if len(ip.src) == 4:
        pseudo = _V4_PSEUDO.pack(
            _ONES_8, 0x45, 0xFF, _IPV4_HEADER_LEN + udp_length, ip.ip_id, ip.flags_fragment,
            0xFF, _IP_PROTO_UDP, 0xFFFF, ip.src, ip.dst, src_port, dst_port, udp_length,
            0xFFFF, bth_start, 0xFF,
        )  # fmt: skip
    else:
        pseudo = _V6_PSEUDO.pack(
            _ONES_8, _V6_FIRST_WORD_MASKED, udp_length, _IP_PROTO_UDP, 0xFF, ip.src, ip.dst,
            src_port, dst_port, udp_length, 0xFFFF, bth_start, 0xFF,
        )  # fmt: skip
    return crc32(pseudo)


def compute_icrc(mrc: bytes | memoryview, ip: IpContext, src_port: int, dst_port: int) -> int:
    """The ICRC of MRC packet ``mrc`` (BTH onwards, *without* its 4-byte ICRC trailer).

    Raises ``ValueError`` for fewer than 5 bytes (callers check for a whole BTH first).

    ``ip``, ``src_port`` and ``dst_port`` are the headers the packet travels (or travelled) in.
    """
    udp_length = _UDP_HEADER_LEN + len(mrc) + ICRC_LEN
    view = memoryview(mrc)
    if len(view) <= _BTH_RESERVED_OFFSET:
        raise ValueError(f"{len(view)} bytes: an MRC packet starts with a 12-byte BTH")
    bth_start = bytes(view[:_BTH_RESERVED_OFFSET])
    seed = pseudo_header_crc(ip, src_port, dst_port, udp_length, bth_start)
    return crc32(view[_BTH_RESERVED_OFFSET + 1 :], seed)


def icrc_bytes(mrc: bytes | memoryview, ip: IpContext, src_port: int, dst_port: int) -> bytes:
    """The 4 trailer bytes to append to ``mrc``."""
    return _ICRC.pack(compute_icrc(mrc, ip, src_port, dst_port))


def icrc_valid(datagram: bytes, ip: IpContext, src_port: int, dst_port: int) -> bool:
    """Whether the last 4 bytes of the UDP payload ``datagram`` are its correct ICRC."""
    if len(datagram) < ICRC_LEN + _BTH_RESERVED_OFFSET + 1:
        return False
    body = memoryview(datagram)[:-ICRC_LEN]
    (carried,) = _ICRC.unpack_from(datagram, len(datagram) - ICRC_LEN)
    return bool(compute_icrc(body, ip, src_port, dst_port) == carried)
