"""Sending the core's datagrams through raw IP sockets, with headers built here.

Why raw sockets rather than a UDP socket: every MRC packet leaves from the UDP source port of
its EV (one of 256 or more per connection) with the DSCP of its class and, on data, ECT(0).
A UDP socket has one source port and one TOS; a raw socket lets each packet carry its own.
IPv4 headers are written in full (``IPPROTO_RAW`` implies ``IP_HDRINCL``) with ID 0 and DF,
exactly the ``IpContext`` the core computed the ICRC over: with DF set and no owning socket,
Linux leaves a zero ID alone (``ip_select_ident``) and fills in only the header checksum.
IPv6 headers are written in full too (``IPV6_HDRINCL``), which is the one way to set the flow
label (the EV's low 16 bits) per packet without registering every label with the kernel.

The UDP checksum is 0 over IPv4 (allowed there; RoCEv2 does the same, the ICRC protects the
packet) and computed over IPv6, where a zero checksum is not allowed.

Sends never block: a full socket buffer makes ``send`` return False, and the caller keeps the
datagram until the socket is writable again, so backpressure never turns into packet loss.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct

from agent.core.datagram import OutgoingDatagram
from agent.io.linux import IPV6_HDRINCL, SO_SNDBUFFORCE

log = logging.getLogger(__name__)

_IPV4_UDP = struct.Struct(">BBHHHBBH4s4sHHHH")
_IPV6_UDP = struct.Struct(">IHBB16s16sHHHH")
_IPV6_PSEUDO = struct.Struct(">16s16sII")
_IPV4_HEADER_LEN = 20
_UDP_HEADER_LEN = 8
_IP_PROTO_UDP = 17
#: Hop limit / TTL of every packet: Linux's default.
DEFAULT_TTL = 64
#: Send buffer asked for: a window's burst (hundreds of packets) fits without EAGAIN.
SEND_BUFFER_BYTES = 8 << 20
_WOULD_BLOCK = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})


def ipv4_udp_header(datagram: OutgoingDatagram, ttl: int = DEFAULT_TTL) -> bytes:
    """The 28 bytes (IPv4 + UDP) in front of ``datagram.payload``.

    The IP checksum is left 0: with ``IP_HDRINCL`` the kernel always fills it in.
    """
    udp_length = _UDP_HEADER_LEN + len(datagram.payload)
    ip = datagram.ip
    return _IPV4_UDP.pack(
        0x45,
        (datagram.dscp << 2) | datagram.ecn,
        _IPV4_HEADER_LEN + udp_length,
        ip.ip_id,
        ip.flags_fragment,
        ttl,
        _IP_PROTO_UDP,
        0,
        ip.src,
        ip.dst,
        datagram.src_port,
        datagram.dst_port,
        udp_length,
        0,
    )


def udp6_checksum(src: bytes, dst: bytes, udp_header: bytes, payload: bytes) -> int:
    """The UDP checksum over IPv6 (RFC 8200 pseudo-header), never 0 (RFC 768: 0 -> 0xFFFF).

    ``udp_header`` has its checksum field zero. Uses that a big-endian number is congruent to
    the sum of its 16-bit words modulo 0xFFFF, which is the ones'-complement sum: one big-int
    conversion instead of a Python loop over 500 words.
    """
    length = len(udp_header) + len(payload)
    pseudo = _IPV6_PSEUDO.pack(src, dst, length, _IP_PROTO_UDP)
    total = int.from_bytes(pseudo + udp_header, "big")
    body = int.from_bytes(payload, "big")
    if len(payload) % 2:
        body <<= 8  # pad the odd byte out to a whole word
    folded = (total + body) % 0xFFFF
    return 0xFFFF - folded


def ipv6_udp_header(datagram: OutgoingDatagram, hop_limit: int = DEFAULT_TTL) -> bytes:
    """The 48 bytes (IPv6 + UDP, checksum included) in front of ``datagram.payload``."""
    payload = datagram.payload
    udp_length = _UDP_HEADER_LEN + len(payload)
    ip = datagram.ip
    tclass = (datagram.dscp << 2) | datagram.ecn
    first_word = (6 << 28) | (tclass << 20) | (datagram.flow_label & 0xFFFFF)
    udp_zero = struct.pack(">HHHH", datagram.src_port, datagram.dst_port, udp_length, 0)
    checksum = udp6_checksum(ip.src, ip.dst, udp_zero, payload)
    return _IPV6_UDP.pack(
        first_word,
        udp_length,
        _IP_PROTO_UDP,
        hop_limit,
        ip.src,
        ip.dst,
        datagram.src_port,
        datagram.dst_port,
        udp_length,
        checksum,
    )


class RawSender:
    """The runtime's one way out: a raw socket per address family in use.

    ``open`` needs CAP_NET_RAW; ``PermissionError`` then reaches the caller, which reports it.
    Counters say what could not be sent and why (``send_errors`` by errno name).
    """

    def __init__(self) -> None:
        self._v4: socket.socket | None = None
        self._v6: socket.socket | None = None
        self._addresses: dict[bytes, str] = {}
        self.sent = 0
        self.send_errors: dict[str, int] = {}

    def open(self, ipv4: bool, ipv6: bool) -> None:
        """Open the sockets for the families in use now, so a missing privilege shows at start."""
        if ipv4 and self._v4 is None:
            self._v4 = _raw_socket(socket.AF_INET)
        if ipv6 and self._v6 is None:
            self._v6 = _raw_socket(socket.AF_INET6)
            self._v6.setsockopt(socket.IPPROTO_IPV6, IPV6_HDRINCL, 1)

    def filenos(self) -> list[int]:
        """File descriptors to watch for writability while a datagram waits."""
        return [s.fileno() for s in (self._v4, self._v6) if s is not None]

    def send(self, datagram: OutgoingDatagram) -> bool:
        """Send one datagram; False when the socket buffer is full (try again when writable).

        Any other failure (no route, message too long) drops the datagram and is counted: to
        the protocol it is a lost packet, which it recovers from.
        """
        ip = datagram.ip
        address = self._addresses.get(ip.dst)
        if address is None:
            address = socket.inet_ntop(
                socket.AF_INET6 if len(ip.dst) == 16 else socket.AF_INET, ip.dst
            )
            self._addresses[ip.dst] = address
        if len(ip.dst) == 4:
            sock = self._v4
            # ipv4_udp_header inlined: this runs for every packet sent.
            payload = datagram.payload
            udp_length = _UDP_HEADER_LEN + len(payload)
            header = _IPV4_UDP.pack(
                0x45, (datagram.dscp << 2) | datagram.ecn, _IPV4_HEADER_LEN + udp_length,
                ip.ip_id, ip.flags_fragment, DEFAULT_TTL, _IP_PROTO_UDP, 0, ip.src, ip.dst,
                datagram.src_port, datagram.dst_port, udp_length, 0,
            )  # fmt: skip
        else:
            sock = self._v6
            header = ipv6_udp_header(datagram)
        if sock is None:
            self._count("no socket for this address family", None, datagram)
            return True
        try:
            sock.sendmsg((header, datagram.payload), (), 0, (address, 0))
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return False
            self._count(errno.errorcode.get(exc.errno or 0, str(exc)), exc, datagram)
            return True
        self.sent += 1
        return True

    def _count(
        self, error: str, exc: OSError | None = None, datagram: OutgoingDatagram | None = None
    ) -> None:
        count = self.send_errors.get(error, 0)
        self.send_errors[error] = count + 1
        if count == 0 and datagram is not None:
            # Once per kind: a persistent local error (a payload above the MTU, no route)
            # would otherwise surface only as an unreachable peer seconds later.
            size = len(datagram.payload) + _UDP_HEADER_LEN
            detail = exc.strerror if exc is not None else error
            hint = " (lower --payload or raise the MTU)" if error == "EMSGSIZE" else ""
            log.warning(
                "cannot send a %d-byte UDP datagram to %s: %s%s",
                size,
                self._addresses.get(datagram.ip.dst, "?"),
                detail,
                hint,
            )

    def close(self) -> None:
        """Close both sockets."""
        for sock in (self._v4, self._v6):
            if sock is not None:
                sock.close()
        self._v4 = self._v6 = None


def _raw_socket(family: socket.AddressFamily) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SEND_BUFFER_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    sock.setblocking(False)
    return sock
