"""RoCEv2's invariant CRC (ICRC) over a whole IP datagram, as plain bytes.

Every RoCEv2 packet ends with a 4-byte ICRC: a CRC-32 over a pseudo-packet made of 8 bytes of
0xFF (the InfiniBand LRH the packet does not have), then the IP header, the UDP header, the BTH
and everything after it, with the fields that routers may legitimately rewrite replaced by ones.
Masking those fields is why the ICRC survives a hop: a switch that re-marks DSCP/ECN (MRC trims
and ECN-marks in flight), decrements the TTL and fixes the IPv4 checksum leaves it valid.

Masked with all-ones (IBA Annex A17, and ``scapy/contrib/roce.py``'s ``compute_icrc``):
  * IPv4: TOS (DSCP + ECN), TTL, header checksum;
  * IPv6: traffic class, flow label, hop limit (the version nibble stays);
  * UDP checksum;
  * BTH byte 4 (FECN/BECN/reserved in RoCE, "reserved" in MRC).

The CRC goes on the wire least-significant byte first, so the 4 bytes equal
``struct.pack("<I", crc)``; that matches scapy's ``BTH.pack_icrc`` and real RoCE NICs.

This module knows nothing about scapy, so the scapy layers, the fast codec and tools can agree on
one definition; it works on the datagram exactly as it travels (IP header first, ICRC last).
"""

from __future__ import annotations

import struct
import zlib

from wire.constants import BTH_LEN, ICRC_LEN

_PSEUDO_LRH = b"\xff" * 8
_UDP_HEADER_LEN = 8
_IPV4_MIN_HEADER_LEN = 20
_IPV6_HEADER_LEN = 40
_IP_PROTO_UDP = 17
_BTH_RESERVED_OFFSET = 4
_ICRC_STRUCT = struct.Struct("<I")


def compute_icrc(ip_datagram: bytes) -> int:
    """Return the ICRC that belongs at the end of ``ip_datagram``.

    ``ip_datagram`` is the whole IP datagram as sent: IP header, UDP header, BTH, extension
    headers, payload and a 4-byte ICRC slot at the end, whose content is ignored (it is what is
    being computed). UDP must follow the IP header directly, as RoCEv2 requires.

    Raises ``ValueError`` naming what is wrong when the bytes cannot be an ICRC-carrying RoCEv2
    datagram (too short, not IPv4/IPv6, not UDP), so a caller never gets a CRC of garbage.
    """
    masked = _masked_datagram(ip_datagram)
    return zlib.crc32(_PSEUDO_LRH + masked[:-ICRC_LEN]) & 0xFFFFFFFF


def icrc_to_bytes(icrc: int) -> bytes:
    """The 4 wire bytes of an ICRC value (least-significant byte first)."""
    return _ICRC_STRUCT.pack(icrc & 0xFFFFFFFF)


def icrc_from_bytes(trailer: bytes) -> int:
    """The ICRC value carried by the 4 wire bytes ``trailer``."""
    if len(trailer) != ICRC_LEN:
        raise ValueError(f"an ICRC is {ICRC_LEN} bytes, got {len(trailer)}")
    (value,) = _ICRC_STRUCT.unpack(trailer)
    return int(value)


def icrc_is_valid(ip_datagram: bytes) -> bool:
    """Whether the last 4 bytes of ``ip_datagram`` are its correct ICRC.

    False as well when the bytes are no RoCEv2 datagram at all (a corrupted version, header
    length or protocol byte): a receiver drops either, and ``compute_icrc`` says which it was.
    """
    try:
        expected = compute_icrc(ip_datagram)
    except ValueError:
        return False
    return expected == icrc_from_bytes(ip_datagram[-ICRC_LEN:])


def _masked_datagram(ip_datagram: bytes) -> bytearray:
    """A copy of the datagram with the variant fields set to ones, after checking its shape."""
    if not ip_datagram:
        raise ValueError("empty datagram: no IP header to compute an ICRC over")
    version = ip_datagram[0] >> 4
    if version == 4:
        header_len = (ip_datagram[0] & 0x0F) * 4
        protocol_offset = 9
        if header_len < _IPV4_MIN_HEADER_LEN:
            raise ValueError(f"IPv4 header length {header_len} is below the minimum of 20 bytes")
    elif version == 6:
        header_len = _IPV6_HEADER_LEN
        protocol_offset = 6
    else:
        raise ValueError(f"IP version {version}: an ICRC needs IPv4 or IPv6")
    minimum = header_len + _UDP_HEADER_LEN + BTH_LEN + ICRC_LEN
    if len(ip_datagram) < minimum:
        raise ValueError(
            f"datagram of {len(ip_datagram)} bytes is shorter than IP + UDP + BTH + ICRC "
            f"({minimum} bytes)"
        )
    protocol = ip_datagram[protocol_offset]
    if protocol != _IP_PROTO_UDP:
        raise ValueError(f"IP next protocol {protocol}: RoCEv2 needs UDP right after the IP header")
    masked = bytearray(ip_datagram)
    if version == 4:
        masked[1] = 0xFF  # TOS: DSCP + ECN
        masked[8] = 0xFF  # TTL
        masked[10:12] = b"\xff\xff"  # header checksum
    else:
        masked[0] |= 0x0F  # traffic class, high nibble
        masked[1:4] = b"\xff\xff\xff"  # traffic class low nibble + flow label
        masked[7] = 0xFF  # hop limit
    udp_checksum = header_len + 6
    masked[udp_checksum : udp_checksum + 2] = b"\xff\xff"
    masked[header_len + _UDP_HEADER_LEN + _BTH_RESERVED_OFFSET] = 0xFF
    return masked
