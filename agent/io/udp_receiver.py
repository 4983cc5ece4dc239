"""Receiving MRC datagrams on UDP port 4791, with the IP header fields the core needs.

The agent owns port 4791 like a NIC owns its RoCE port: one socket per address family, bound
to the wildcard address, so a second agent (or anything else holding the port) is refused at
start with EADDRINUSE rather than silently sharing the traffic (no SO_REUSEADDR/REUSEPORT).
Which plane a datagram arrived for comes from its header destination (IP_PKTINFO /
IPV6_PKTINFO); the core drops datagrams for addresses that are none of its planes.

Each datagram is handed over with its DSCP and ECN (IP_RECVTOS / IPV6_RECVTCLASS: the DSCP
says whether a switch trimmed it, the ECN bits whether one marked it) and, over IPv6, its flow
label (IPV6_FLOWINFO), which carries the EV's low 16 bits. Over IPv4 the receiver assumes the
header the agent's raw sender writes (ID 0, DF), the defaults of ``IpContext``: the ICRC covers
those fields and a UDP socket cannot read them. A peer that sends anything else fails the
ICRC check in the core and is counted there.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import Final

from agent.core.datagram import IncomingDatagram, IpContext
from agent.io import mmsg
from agent.io.errors import PortInUseError
from agent.io.linux import (
    IN6_PKTINFO_ADDR_OFFSET,
    IN_PKTINFO_ADDR_OFFSET,
    IP_PKTINFO,
    IP_RECVTOS,
    IP_TOS_CMSG,
    IPV6_FLOWINFO,
    IPV6_PKTINFO,
    IPV6_RECVPKTINFO,
    IPV6_RECVTCLASS,
    IPV6_TCLASS,
    SO_RCVBUFFORCE,
    UDP_NO_CHECK6_RX,
)
from wire.constants import ROCEV2_UDP_PORT

#: Largest datagram accepted: a 9000-byte jumbo payload plus every MRC header, rounded up.
MAX_DATAGRAM: Final = 9216
#: Receive buffer asked for: a full window of 1 KiB packets (4096) can queue while the agent
#: is busy sending, instead of being dropped by the kernel.
RECEIVE_BUFFER_BYTES: Final = 16 << 20
_CMSG_SPACE: Final = socket.CMSG_SPACE(4) + socket.CMSG_SPACE(20) + socket.CMSG_SPACE(4) + 64
_IPPROTO_IP: Final = socket.IPPROTO_IP
#: A plain int: ``socket.MSG_TRUNC`` is an IntFlag, and ``&`` on it costs an enum call per
#: datagram.
_MSG_TRUNC: Final = int(socket.MSG_TRUNC)
_IPPROTO_IPV6: Final = socket.IPPROTO_IPV6
_PKTINFO_ADDR_END: Final = IN_PKTINFO_ADDR_OFFSET + 4
#: Distinct (source, control messages) pairs remembered by the batched receive loop before the
#: table is cleared: a connection's 256 EVs need 256, the bound keeps a sender that varies
#: them at will from growing it without limit.
MAX_HEADER_CACHE: Final = 4096


def parse_ancillary_v4(ancdata: list[tuple[int, int, bytes]]) -> tuple[int, bytes | None]:
    """(TOS byte, header destination address) from an IPv4 datagram's control messages."""
    tos = 0
    destination: bytes | None = None
    for level, kind, data in ancdata:
        if level == _IPPROTO_IP:
            if kind == IP_TOS_CMSG and data:
                tos = data[0]
            elif kind == IP_PKTINFO and len(data) >= IN_PKTINFO_ADDR_OFFSET + 4:
                destination = bytes(data[IN_PKTINFO_ADDR_OFFSET : IN_PKTINFO_ADDR_OFFSET + 4])
    return tos, destination


def parse_ancillary_v6(ancdata: list[tuple[int, int, bytes]]) -> tuple[int, bytes | None, int]:
    """(traffic class, header destination address, flow label) from an IPv6 datagram's control
    messages. The traffic class arrives as a host-order int, the flow info as the header's
    big-endian word; the kernel omits the flow info when it is zero."""
    tclass = 0
    destination: bytes | None = None
    flow_label = 0
    for level, kind, data in ancdata:
        if level != _IPPROTO_IPV6:
            continue
        if kind == IPV6_TCLASS and len(data) >= 4:
            tclass = int.from_bytes(data[:4], "little") & 0xFF
        elif kind == IPV6_PKTINFO and len(data) >= IN6_PKTINFO_ADDR_OFFSET + 16:
            destination = bytes(data[IN6_PKTINFO_ADDR_OFFSET : IN6_PKTINFO_ADDR_OFFSET + 16])
        elif kind == IPV6_FLOWINFO and len(data) >= 4:
            flow_label = int.from_bytes(data[:4], "big") & 0xFFFFF
    return tclass, destination, flow_label


class UdpReceiver:
    """The agent's UDP 4791 socket(s): bound at construction, drained in batches."""

    def __init__(
        self, ipv4: bool, ipv6: bool, port: int = ROCEV2_UDP_PORT, batch: bool | None = None
    ) -> None:
        self.port = port
        self.sockets: list[socket.socket] = []
        self._buffer = bytearray(MAX_DATAGRAM)
        self._view = memoryview(self._buffer)
        self._contexts: dict[tuple[str, bytes], IpContext] = {}
        self._packed: dict[str, bytes] = {}
        #: The ``recvmmsg`` batch (None: one ``recvmsg_into`` per datagram); ``batch`` None
        #: uses it wherever ``mmsg.available()``.
        self._batch: mmsg.ReceiveBatch | None = None
        if batch if batch is not None else mmsg.available():
            self._batch = mmsg.ReceiveBatch(slot_size=MAX_DATAGRAM, control_size=_CMSG_SPACE)
        #: Raw source address and control bytes -> (IP context, source port, DSCP, ECN, flow
        #: label), or the reason such a datagram is dropped: what the batched loop parsed once.
        self._headers: dict[bytes, tuple[IpContext, int, int, int, int] | str] = {}
        #: Datagrams dropped before the core saw them, by reason (too long, no destination).
        self.drops: dict[str, int] = {}
        self.received = 0
        try:
            if ipv4:
                self.sockets.append(_bound_socket(socket.AF_INET, port))
            if ipv6:
                self.sockets.append(_bound_socket(socket.AF_INET6, port))
        except BaseException:
            self.close()
            raise

    @property
    def batched(self) -> bool:
        """Whether ``drain`` reads with ``recvmmsg``."""
        return self._batch is not None

    def drain(
        self, sock: socket.socket, handle: Callable[[IncomingDatagram], None], limit: int
    ) -> int:
        """Hand up to ``limit`` waiting datagrams of ``sock`` to ``handle``; returns how many."""
        if self._batch is not None:
            return self._drain_batched(self._batch, sock, handle, limit)
        v4 = sock.family == socket.AF_INET
        view = self._view
        contexts = self._contexts
        port = self.port
        count = 0
        while count < limit:
            try:
                size, ancdata, flags, address = sock.recvmsg_into((view,), _CMSG_SPACE)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self._drop(errno.errorcode.get(exc.errno or 0, str(exc)))
                break
            count += 1
            if flags & _MSG_TRUNC:
                self._drop("longer than MAX_DATAGRAM")
                continue
            source = address[0]
            if v4:
                # parse_ancillary_v4 inlined: this runs for every datagram received.
                tos = 0
                destination = None
                for level, kind, data in ancdata:
                    if level == _IPPROTO_IP:
                        if kind == IP_PKTINFO and len(data) >= _PKTINFO_ADDR_END:
                            destination = data[IN_PKTINFO_ADDR_OFFSET:_PKTINFO_ADDR_END]
                        elif kind == IP_TOS_CMSG and data:
                            tos = data[0]
                flow_label = 0
            else:
                tos, destination, flow_label = parse_ancillary_v6(ancdata)
            if destination is None:
                self._drop("no destination address")
                continue
            context = contexts.get((source, destination))
            if context is None:
                context = IpContext(src=self._pack(source, v4), dst=destination)
                contexts[(source, destination)] = context
            self.received += 1
            handle(
                IncomingDatagram(
                    bytes(view[:size]), context, address[1], tos >> 2, tos & 3, flow_label, port
                )
            )
        return count

    def _drain_batched(
        self,
        batch: mmsg.ReceiveBatch,
        sock: socket.socket,
        handle: Callable[[IncomingDatagram], None],
        limit: int,
    ) -> int:
        """``drain`` with one ``recvmmsg`` per batch of up to 64 datagrams.

        A datagram's source address and control messages are the same bytes for every packet
        of one flow on one EV (DSCP and ECN included), so they are parsed once and looked up
        by their raw bytes afterwards.
        """
        v4 = sock.family == socket.AF_INET
        fd = sock.fileno()
        port = self.port
        headers = self._headers
        data = batch.data
        meta = batch.meta
        results = batch.headers
        result_offset = mmsg.RESULT_OFFSET
        slot_size = batch.slot_size
        meta_size = batch.meta_size
        key_end = mmsg.NAME_SPACE
        # Where each slot's address and datagram start, computed once, not per datagram.
        meta_starts = range(0, batch.slots * meta_size, meta_size)
        data_starts = range(0, batch.slots * slot_size, slot_size)
        count = 0
        while count < limit:
            try:
                received = batch.receive(fd, limit - count)
            except OSError as exc:
                self._drop(errno.errorcode.get(exc.errno or 0, str(exc)))
                break
            if not received:
                break
            handed = 0
            # Every header's (control bytes, flags, datagram bytes) in one unpack, taken three
            # at a time from one iterator; it runs out first (the slot offsets cover them all).
            values = iter(mmsg.results(received).unpack_from(results, result_offset))
            # The batch's addresses and control messages copied out in one go: each key below
            # is then one slice of bytes, not a memoryview slice copied into bytes.
            sources = meta[: received * meta_size].tobytes()
            for control_length, flags, size, meta_start, start in zip(
                values, values, values, meta_starts, data_starts, strict=False
            ):
                if flags & _MSG_TRUNC:
                    self._drop("longer than MAX_DATAGRAM")
                    continue
                # Source port and address (the family is known), then the control messages.
                key = sources[meta_start + 2 : meta_start + key_end + control_length]
                header = headers.get(key)
                if header is None:
                    header = self._parse_header(
                        sources[meta_start : meta_start + key_end],
                        sources[meta_start + key_end : meta_start + key_end + control_length],
                        v4,
                    )
                    if len(headers) >= MAX_HEADER_CACHE:
                        headers.clear()
                    headers[key] = header
                if isinstance(header, str):
                    self._drop(header)
                    continue
                context, src_port, dscp, ecn, flow_label = header
                handed += 1
                handle(
                    IncomingDatagram(
                        bytes(data[start : start + size]), context, src_port, dscp, ecn,
                        flow_label, port,
                    )
                )  # fmt: skip
            self.received += handed
            count += received
            if received < batch.slots:
                break  # the socket is empty (or the limit reached)
        return count

    def _parse_header(
        self, name: bytes, control: bytes, v4: bool
    ) -> tuple[IpContext, int, int, int, int] | str:
        """(IP context, source port, DSCP, ECN, flow label) from a raw source address and
        control messages, or why the datagram is dropped."""
        ancillary = mmsg.split_control(control)
        if v4:
            tos, destination = parse_ancillary_v4(ancillary)
            flow_label = 0
            source = bytes(name[4:8])
        else:
            tos, destination, flow_label = parse_ancillary_v6(ancillary)
            source = bytes(name[8:24])
        if destination is None:
            return "no destination address"
        src_port = int.from_bytes(name[2:4], "big")
        return IpContext(src=source, dst=destination), src_port, tos >> 2, tos & 3, flow_label

    def _pack(self, address: str, v4: bool) -> bytes:
        packed = self._packed.get(address)
        if packed is None:
            packed = socket.inet_pton(socket.AF_INET if v4 else socket.AF_INET6, address)
            self._packed[address] = packed
        return packed

    def _drop(self, reason: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1

    def close(self) -> None:
        """Release the port."""
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def _bound_socket(family: socket.AddressFamily, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        if family == socket.AF_INET:
            sock.setsockopt(_IPPROTO_IP, IP_RECVTOS, 1)
            sock.setsockopt(_IPPROTO_IP, IP_PKTINFO, 1)
            address: tuple[str, int] | tuple[str, int, int, int] = ("0.0.0.0", port)
        else:
            sock.setsockopt(_IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.setsockopt(_IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
            sock.setsockopt(_IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
            sock.setsockopt(_IPPROTO_IPV6, IPV6_FLOWINFO, 1)
            sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)  # trimmed packets
            address = ("::", port, 0, 0)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                family_name = "IPv4" if family == socket.AF_INET else "IPv6"
                raise PortInUseError(
                    f"UDP port {port} ({family_name}) is already in use: another mrc-agent "
                    f"(or another RoCEv2 endpoint) owns it; stop it, or let this command use "
                    f"it through its control socket (--socket)"
                ) from exc
            raise
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
