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

Sends never block: a full socket buffer makes ``send`` return False (``send_many`` returns
where it stopped), and the caller keeps the datagram until the socket is writable again, so
backpressure never turns into packet loss. ``send_many`` sends a whole batch per system call
with ``sendmmsg`` where the C library has it (``agent.io.mmsg``).

This module owns the IP and UDP headers and the ``sendmmsg`` layout: the core produces MRC
datagrams (BTH through ICRC), as objects or written in place into ``make_slots``' slots, whose
headers ``send_slots`` writes in front of them.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Final

from agent.core.datagram import IpContext, OutgoingDatagram
from agent.core.send_slots import SendSlots
from agent.io import mmsg
from agent.io.linux import IPV6_HDRINCL, SO_SNDBUFFORCE

log = logging.getLogger(__name__)

_IPV4_UDP: Final = struct.Struct(">BBHHHBBH4s4sHHHH")
_IPV6_UDP: Final = struct.Struct(">IHBB16s16sHHHH")
_IPV6_PSEUDO: Final = struct.Struct(">16s16sII")
#: IPv4 header (20, no options) + UDP header (8) in front of each UDP payload sent over IPv4.
IPV4_UDP_HEADER_LEN: Final = 28
_IPV4_HEADER_LEN: Final = 20
_UDP_HEADER_LEN: Final = 8
_IP_PROTO_UDP: Final = 17
#: Hop limit / TTL of every packet: Linux's default.
DEFAULT_TTL: Final = 64
#: Send buffer asked for: a window's burst (hundreds of packets) fits without EAGAIN.
SEND_BUFFER_BYTES: Final = 8 << 20
_WOULD_BLOCK: Final = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS})
#: Largest IP packet a batch slot holds: a 9000-byte jumbo payload with every MRC, UDP and IPv6
#: header, rounded up. A larger datagram goes out alone through ``send`` (and fails there with
#: EMSGSIZE on any real link).
BATCH_SLOT_BYTES: Final = 9216 + 64
_IOVEC_SIZE: Final = mmsg.IOVEC_SIZE
_IOV_LEN_OFFSET: Final = mmsg.IOV_LEN_OFFSET
_IOV_LEN: Final = mmsg.IOV_LEN
_SOCKADDR_IN: Final = struct.Struct("=H2s4s8x")
_SOCKADDR_IN6: Final = struct.Struct("=H2s4s16sI")


def sockaddr(address: bytes) -> bytes:
    """The packed ``struct sockaddr_in`` / ``sockaddr_in6`` (port 0) of a packed address, as
    ``sendmmsg`` wants each destination."""
    if len(address) == 4:
        return _SOCKADDR_IN.pack(socket.AF_INET, b"\0\0", address)
    return _SOCKADDR_IN6.pack(socket.AF_INET6, b"\0\0", b"\0" * 4, address, 0)


def pack_ipv4_udp_header(
    buffer: bytearray | memoryview,
    offset: int,
    ip: IpContext,
    src_port: int,
    dst_port: int,
    dscp: int,
    ecn: int,
    payload_length: int,
    ttl: int,
) -> None:
    """Write the IPv4 + UDP header (``IPV4_UDP_HEADER_LEN`` bytes) of a UDP datagram with a
    ``payload_length``-byte payload at ``offset`` of ``buffer``: ID and flags from its
    ``IpContext``, TOS from its DSCP and ECN, checksums 0 (with ``IP_HDRINCL`` the kernel fills
    in the IPv4 one; a zero UDP checksum is allowed over IPv4). The one place this header is
    laid out: every IPv4 packet the agent sends gets it from here."""
    udp_length = _UDP_HEADER_LEN + payload_length
    _IPV4_UDP.pack_into(
        buffer, offset, 0x45, (dscp << 2) | ecn, _IPV4_HEADER_LEN + udp_length, ip.ip_id,
        ip.flags_fragment, ttl, _IP_PROTO_UDP, 0, ip.src, ip.dst, src_port, dst_port,
        udp_length, 0,
    )  # fmt: skip


def ipv4_udp_header(datagram: OutgoingDatagram, ttl: int = DEFAULT_TTL) -> bytes:
    """The 28 bytes (IPv4 + UDP) in front of ``datagram.payload``.

    The IP checksum is left 0: with ``IP_HDRINCL`` the kernel always fills it in.
    """
    header = bytearray(IPV4_UDP_HEADER_LEN)
    pack_ipv4_udp_header(
        header, 0, datagram.ip, datagram.src_port, datagram.dst_port, datagram.dscp,
        datagram.ecn, len(datagram.payload), ttl,
    )  # fmt: skip
    return bytes(header)


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

    def __init__(self, batch: bool | None = None) -> None:
        self._v4: socket.socket | None = None
        self._v6: socket.socket | None = None
        self._addresses: dict[bytes, str] = {}
        self._sockaddrs: dict[bytes, bytes] = {}
        self.sent = 0
        self.send_errors: dict[str, int] = {}
        #: ``send_many``'s sendmmsg batch (None: one ``sendmsg`` per datagram). ``batch``:
        #: None uses it wherever ``mmsg.available()``.
        self._batch: mmsg.SendBatch | None = None
        if batch if batch is not None else mmsg.available():
            self._batch = mmsg.SendBatch(slot_size=BATCH_SLOT_BYTES)
        #: The ``sendmmsg`` batch behind ``make_slots``' slots (the core writes into it).
        self._slot_batch: mmsg.SendBatch | None = None

    @property
    def batched(self) -> bool:
        """Whether ``send_many`` uses ``sendmmsg``."""
        return self._batch is not None

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
        if len(datagram.ip.dst) == 4:
            header = ipv4_udp_header(datagram)
        else:
            header = ipv6_udp_header(datagram)
        return self.send_packet((header, datagram.payload), datagram.ip.dst, datagram)

    def send_packet(
        self, parts: tuple[bytes, ...], destination: bytes, datagram: OutgoingDatagram
    ) -> bool:
        """Send the IP packet made of ``parts`` (headers written in full) to the packed
        ``destination``, which the kernel routes by; ``send``'s return and error counting,
        ``datagram`` naming the packet in a warning."""
        address = self._addresses.get(destination)
        if address is None:
            address = socket.inet_ntop(
                socket.AF_INET6 if len(destination) == 16 else socket.AF_INET, destination
            )
            self._addresses[destination] = address
        sock = self._v4 if len(destination) == 4 else self._v6
        if sock is None:
            self._count("no socket for this address family", None, datagram)
            return True
        try:
            sock.sendmsg(parts, (), 0, (address, 0))
        except OSError as exc:
            if exc.errno in _WOULD_BLOCK:
                return False
            self._count(errno.errorcode.get(exc.errno or 0, str(exc)), exc, datagram)
            return True
        self.sent += 1
        return True

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int:
        """Send ``datagrams[start:]`` in order; returns the index of the first one the socket
        buffer could not take (``len(datagrams)`` when it took all), to be offered again once
        the socket is writable. As in ``send``, any other failure drops and counts the
        datagram it concerns, and the rest still go.

        With ``sendmmsg`` (see ``agent.io.mmsg``): up to 64 datagrams per system call, each
        header packed and payload copied straight into its slot of a preallocated buffer.
        """
        batch = self._batch
        if batch is None:
            send = self.send
            for index in range(start, len(datagrams)):
                if not send(datagrams[index]):
                    return index
            return len(datagrams)
        total = len(datagrams)
        index = start
        slots = batch.slots
        slot_size = batch.slot_size
        buffer = batch.buffer
        iov_view = batch.iov_view
        slot_names = batch.slot_names
        set_name = batch.set_name
        pack_length = _IOV_LEN.pack_into
        sockaddrs = self._sockaddrs
        while index < total:
            first = datagrams[index]
            v4 = len(first.ip.dst) == 4
            sock = self._v4 if v4 else self._v6
            if sock is None or len(first.payload) + _IPV6_UDP.size > slot_size:
                if not self.send(first):  # counted there, or too long for a slot
                    return index
                index += 1
                continue
            count = 0
            while index + count < total and count < slots:
                datagram = datagrams[index + count]
                ip = datagram.ip
                dst = ip.dst
                payload = datagram.payload
                size = len(payload)
                if (len(dst) == 4) is not v4 or size + _IPV6_UDP.size > slot_size:
                    break
                offset = count * slot_size
                if v4:
                    pack_ipv4_udp_header(
                        buffer, offset, ip, datagram.src_port, datagram.dst_port,
                        datagram.dscp, datagram.ecn, size, DEFAULT_TTL,
                    )  # fmt: skip
                    header_length = IPV4_UDP_HEADER_LEN
                else:
                    header = ipv6_udp_header(datagram)
                    header_length = len(header)
                    buffer[offset : offset + header_length] = header
                start_of_payload = offset + header_length
                buffer[start_of_payload : start_of_payload + size] = payload
                pack_length(iov_view, count * _IOVEC_SIZE + _IOV_LEN_OFFSET, header_length + size)
                name = sockaddrs.get(dst)
                if name is None:
                    name = sockaddrs[dst] = sockaddr(dst)
                if slot_names[count] is not name:
                    set_name(count, name)
                count += 1
            batched = datagrams[index : index + count]
            done = self._flush(batch, sock.fileno(), count, batched.__getitem__)
            if done < count:
                return index + done
            index += count
        return total

    def make_slots(self, sink: Callable[[SendSlots], None]) -> SendSlots | None:
        """Send slots the core writes MRC datagrams into (``agent.core.send_slots``), backed
        by a ``sendmmsg`` batch of their own: each slot starts with room for the IPv4 and UDP
        headers ``send_slots`` writes. ``sink`` is called when they are to go (and should call
        ``send_slots``). None without ``sendmmsg`` or an IPv4 socket: the core then hands
        every datagram over as an object."""
        if self._batch is None or self._v4 is None:
            return None
        batch = self._slot_batch = mmsg.SendBatch(slot_size=BATCH_SLOT_BYTES)
        return SendSlots(batch.buffer, batch.slot_size, batch.slots, IPV4_UDP_HEADER_LEN, sink)

    def send_slots(self, slots: SendSlots) -> int:
        """Send slots ``0..slots.count-1`` of ``make_slots``' slots in order, each behind the
        IPv4 and UDP headers its envelope describes; returns the first one the socket buffer
        could not take (``slots.count`` when it took all). As in ``send_many``, any other
        failure drops and counts the packet it concerns."""
        batch = self._slot_batch
        sock = self._v4
        if batch is None or sock is None:
            raise RuntimeError("send_slots without make_slots")
        count = slots.count
        if not count:
            return 0
        buffer = batch.buffer
        slot_size = batch.slot_size
        iov_view = batch.iov_view
        names = batch.slot_names
        sockaddrs = self._sockaddrs
        envelopes = slots.envelopes
        last: IpContext | None = None
        name = b""
        for slot in range(count):
            envelope = envelopes[slot]
            ip = envelope.ip
            length = envelope.length
            pack_ipv4_udp_header(
                buffer, slot * slot_size, ip, envelope.src_port, envelope.dst_port,
                envelope.dscp, envelope.ecn, length, DEFAULT_TTL,
            )  # fmt: skip
            _IOV_LEN.pack_into(
                iov_view, slot * _IOVEC_SIZE + _IOV_LEN_OFFSET, IPV4_UDP_HEADER_LEN + length
            )
            if ip is not last:
                # One peer over one plane (the common case): one lookup per batch.
                last = ip
                found = sockaddrs.get(ip.dst)
                if found is None:
                    found = sockaddrs[ip.dst] = sockaddr(ip.dst)
                name = found
            if names[slot] is not name:
                batch.set_name(slot, name)
        return self._flush(batch, sock.fileno(), count, slots.datagram)

    def _flush(
        self,
        batch: mmsg.SendBatch,
        fd: int,
        count: int,
        datagram_at: Callable[[int], OutgoingDatagram],
    ) -> int:
        """Send slots ``0..count-1`` of ``batch``; returns the first slot the socket buffer
        could not take (``count`` when it took all). Any other failure drops and counts the
        packet of that slot (``datagram_at`` names it) and the rest still go."""
        done = 0
        while done < count:
            sent, error = batch.flush(fd, count, done)
            self.sent += sent
            done += sent
            if error:
                if error in _WOULD_BLOCK:
                    return done
                exc = OSError(error, os.strerror(error))
                self._count(errno.errorcode.get(error, str(exc)), exc, datagram_at(done))
                done += 1
        return count

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
                _format_address(datagram.ip.dst),
                detail,
                hint,
            )

    def close(self) -> None:
        """Close both sockets."""
        for sock in (self._v4, self._v6):
            if sock is not None:
                sock.close()
        self._v4 = self._v6 = None


def _format_address(address: bytes) -> str:
    try:
        return socket.inet_ntop(socket.AF_INET6 if len(address) == 16 else socket.AF_INET, address)
    except ValueError:
        return "?"


def _raw_socket(family: socket.AddressFamily) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SEND_BUFFER_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    sock.setblocking(False)
    return sock
