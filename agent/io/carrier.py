"""This host's ports: whether each plane's interface has its link, learned from netlink.

A NIC that loses a port stops spraying onto that plane at once and says so in the port-state
bitmap it sends its peers (``Connection.set_local_plane_up``: PORT_STATUS). The agent's ports
are the interfaces holding its plane addresses, so it takes the same signal from the kernel: a
``NETLINK_ROUTE`` socket subscribed to link and address notifications, watched by the
runtime's reactor like any other socket (no thread, nothing polled). A plane is up while its
interface is administratively up and has carrier (``IFF_UP`` and ``IFF_RUNNING``, which the
kernel sets from the operational state, as ``ip link`` shows it); each change is handed to
``on_change(plane, up)``, which the runtime points at ``EndpointPool.set_plane_up``.

At start the current state is dumped (addresses, then links), so a plane whose port is already
down is never sprayed on; if the kernel reports that notifications were lost (``ENOBUFS``),
the state is dumped again. An address found on no interface leaves its plane up: the agent
cannot tell, and refusing to send would be worse than trying. The interface of a plane is the
one its address was last seen on (an IPv6 address leaves its interface when that goes down and
comes back with it; an IPv4 address stays).

Why the standard library rather than pyroute2, which the controller's linux southbound uses:
the runtime is one thread around a selector, while pyroute2 (0.9) runs its netlink sockets in
an asyncio loop of its own; and the agent needs only three message layouts. They are fixed
kernel ABI (``linux/netlink.h``, ``linux/rtnetlink.h``, ``linux/if_addr.h``), in host byte
order. A malformed message is counted and the rest of its buffer dropped; messages from any
sender but the kernel are ignored.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

log = logging.getLogger(__name__)

# linux/rtnetlink.h: message types and multicast groups (the legacy bit masks for bind()).
RTM_NEWLINK: Final = 16
RTM_DELLINK: Final = 17
RTM_GETLINK: Final = 18
RTM_NEWADDR: Final = 20
RTM_GETADDR: Final = 22
RTMGRP_LINK: Final = 0x1
RTMGRP_IPV4_IFADDR: Final = 0x10
RTMGRP_IPV6_IFADDR: Final = 0x100
# linux/netlink.h
NLMSG_ERROR: Final = 2
NLMSG_DONE: Final = 3
NLM_F_REQUEST: Final = 0x1
NLM_F_DUMP: Final = 0x300
# linux/if.h
IFF_UP: Final = 0x1
IFF_RUNNING: Final = 0x40
# linux/if_addr.h
IFA_ADDRESS: Final = 1
IFA_LOCAL: Final = 2
# linux/if_link.h
IFLA_IFNAME: Final = 3

#: struct nlmsghdr: length, type, flags, sequence, port id.
NLMSG_HEADER: Final = struct.Struct("=IHHII")
#: struct ifinfomsg: family, pad, device type, index, flags, change mask.
IFINFOMSG: Final = struct.Struct("=BxHiII")
#: struct ifaddrmsg: family, prefix length, flags, scope, index.
IFADDRMSG: Final = struct.Struct("=BBBBI")
#: struct rtattr: length, type.
RTATTR: Final = struct.Struct("=HH")
#: struct rtgenmsg, padded to 4 bytes: the family of a dump request.
RTGENMSG: Final = struct.Struct("=B3x")

#: One recv: a dump part is at most a page or two; notifications are small.
RECEIVE_BUFFER: Final = 65536
#: The kernel's socket buffer for notifications: room for a burst of link changes.
SOCKET_BUFFER: Final = 1 << 20
#: How long the start-up dump may take before the agent starts without it.
DUMP_TIMEOUT_S: Final = 2.0


def _align(length: int) -> int:
    return (length + 3) & ~3


class MalformedNetlink(ValueError):
    """A netlink message whose lengths do not add up."""


@dataclass(frozen=True)
class LinkState:
    """An interface's state (RTM_NEWLINK), or its removal (RTM_DELLINK: ``up`` False)."""

    index: int
    name: str
    up: bool


@dataclass(frozen=True)
class AddressOn:
    """An address assigned to interface ``index`` (RTM_NEWADDR)."""

    index: int
    address: bytes


@dataclass(frozen=True)
class DumpEnd:
    """The end of the dump with sequence number ``seq`` (NLMSG_DONE, or the error that ended
    it: ``error`` is the errno, 0 for a normal end)."""

    seq: int
    error: int = 0


Message = LinkState | AddressOn | DumpEnd


def _attributes(data: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Each rtattr in ``data[start:end]`` as (type, payload)."""
    offset = start
    while offset + RTATTR.size <= end:
        length, kind = RTATTR.unpack_from(data, offset)
        if length < RTATTR.size or offset + length > end:
            raise MalformedNetlink(f"attribute of length {length} at {offset}")
        yield kind & 0x3FFF, data[offset + RTATTR.size : offset + length]  # no NESTED/BYTEORDER
        offset += _align(length)


def parse(data: bytes) -> list[Message]:
    """The link, address and end-of-dump messages in one netlink read; every other message type
    is skipped. Raises ``MalformedNetlink`` for lengths that do not fit."""
    messages: list[Message] = []
    offset = 0
    size = len(data)
    while offset + NLMSG_HEADER.size <= size:
        length, kind, _flags, seq, _port = NLMSG_HEADER.unpack_from(data, offset)
        if length < NLMSG_HEADER.size or offset + length > size:
            raise MalformedNetlink(f"message of length {length} at {offset} in {size} bytes")
        body = offset + NLMSG_HEADER.size
        end = offset + length
        if kind in (RTM_NEWLINK, RTM_DELLINK):
            if body + IFINFOMSG.size > end:
                raise MalformedNetlink("link message shorter than struct ifinfomsg")
            _family, _type, index, flags, _change = IFINFOMSG.unpack_from(data, body)
            name = ""
            for attr, value in _attributes(data, body + IFINFOMSG.size, end):
                if attr == IFLA_IFNAME:
                    name = value.split(b"\0", 1)[0].decode(errors="replace")
            up = kind == RTM_NEWLINK and flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING
            messages.append(LinkState(index, name, up))
        elif kind == RTM_NEWADDR:
            if body + IFADDRMSG.size > end:
                raise MalformedNetlink("address message shorter than struct ifaddrmsg")
            family, _prefix, _aflags, _scope, index = IFADDRMSG.unpack_from(data, body)
            found: dict[int, bytes] = {}
            for attr, value in _attributes(data, body + IFADDRMSG.size, end):
                if attr in (IFA_ADDRESS, IFA_LOCAL):
                    found[attr] = value
            # IPv4 names the interface's own address IFA_LOCAL (IFA_ADDRESS is the peer's on
            # a point-to-point link); IPv6 has IFA_ADDRESS only.
            address = found.get(IFA_LOCAL, found.get(IFA_ADDRESS))
            wanted = 4 if family == socket.AF_INET else 16 if family == socket.AF_INET6 else 0
            if address is not None and len(address) == wanted:
                messages.append(AddressOn(index, address))
        elif kind == NLMSG_DONE:
            messages.append(DumpEnd(seq))
        elif kind == NLMSG_ERROR:
            if body + 4 > end:
                raise MalformedNetlink("error message without its code")
            (code,) = struct.unpack_from("=i", data, body)
            if code:  # 0 is an acknowledgement, not an error
                messages.append(DumpEnd(seq, -code))
        offset += _align(length)
    return messages


def dump_request(kind: int, seq: int) -> bytes:
    """An RTM_GETLINK / RTM_GETADDR dump request for every family."""
    body = RTGENMSG.pack(socket.AF_UNSPEC)
    header = NLMSG_HEADER.pack(
        NLMSG_HEADER.size + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, seq, 0
    )
    return header + body


class PlaneLinks:
    """Which planes are up, from the link and address messages seen so far (no I/O).

    ``feed`` takes parsed messages and returns the planes whose state changed, with the new
    state, in plane order. Every plane starts up, as the core's endpoints do.
    """

    def __init__(self, addresses: Sequence[bytes]) -> None:
        self._addresses = tuple(addresses)
        #: Interface index of each plane's address (None: not seen on any interface).
        self.interfaces: list[int | None] = [None] * len(self._addresses)
        self._links: dict[int, LinkState] = {}
        self.up = [True] * len(self._addresses)

    def feed(self, messages: Sequence[Message]) -> list[tuple[int, bool]]:
        """Apply ``messages``; the (plane, up) pairs that changed."""
        for message in messages:
            if isinstance(message, LinkState):
                self._links[message.index] = message
            elif isinstance(message, AddressOn):
                for plane, address in enumerate(self._addresses):
                    if address == message.address:
                        self.interfaces[plane] = message.index
        changed = []
        for plane, index in enumerate(self.interfaces):
            link = None if index is None else self._links.get(index)
            up = True if link is None else link.up
            if up != self.up[plane]:
                self.up[plane] = up
                changed.append((plane, up))
        return changed

    def interface_name(self, plane: int) -> str | None:
        """The name of ``plane``'s interface, if known."""
        index = self.interfaces[plane]
        link = None if index is None else self._links.get(index)
        return None if link is None else link.name


class NetlinkSocket(Protocol):
    """What the watch needs of its socket (a real ``NETLINK_ROUTE`` socket, or a test's)."""

    def fileno(self) -> int:
        """The descriptor the reactor waits on."""
        ...

    def send(self, data: bytes, /) -> int:
        """Send a request to the kernel."""
        ...

    def recvfrom(self, size: int, /) -> tuple[bytes, Any]:
        """One message batch and its sender."""
        ...

    def setblocking(self, flag: bool, /) -> None:
        """Blocking or not."""
        ...

    def settimeout(self, value: float | None, /) -> None:
        """Blocking with a timeout."""
        ...

    def close(self) -> None:
        """Release it."""
        ...


def open_netlink_socket() -> socket.socket:
    """A route netlink socket subscribed to link and address changes."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        sock.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR))
    except BaseException:
        sock.close()
        raise
    return sock


class PortWatch:
    """The planes' link state, kept current from a netlink socket the reactor watches.

    ``start(on_change)`` dumps the current state (blocking, at most ``DUMP_TIMEOUT_S``) and
    reports each plane that is down; from then on ``readable`` (the reactor's callback) reads
    what the kernel sent and reports each change.
    """

    def __init__(self, addresses: Sequence[bytes], sock: NetlinkSocket | None = None) -> None:
        self.links = PlaneLinks(addresses)
        self._sock: NetlinkSocket = sock if sock is not None else open_netlink_socket()
        self._on_change: Callable[[int, bool], None] = _ignore
        self._seq = 0
        #: Dumps still to request, in order, and the one in progress (its sequence number).
        self._dumps: list[int] = []
        self._dumping: int | None = None
        #: Netlink reads that held a malformed message (the rest of that read was dropped).
        self.malformed = 0
        #: Times the kernel dropped notifications for us (each answered by a fresh dump).
        self.overruns = 0
        #: Link changes reported to ``on_change``.
        self.changes = 0

    def fileno(self) -> int:
        """The netlink socket's descriptor."""
        return self._sock.fileno()

    def start(self, on_change: Callable[[int, bool], None]) -> None:
        """Read the current state, report the planes that are down, then watch."""
        self._on_change = on_change
        self._request_dumps()
        self._sock.settimeout(DUMP_TIMEOUT_S)
        try:
            while self._dumping is not None:
                self._receive_once()
        except TimeoutError:
            log.warning(
                "port state: no answer from the kernel in %.0f s; planes count as up until a "
                "link change says otherwise",
                DUMP_TIMEOUT_S,
            )
            self._dumps.clear()
            self._dumping = None
        finally:
            self._sock.setblocking(False)

    def readable(self, _mask: int = 0) -> None:
        """Read everything the kernel has sent (the reactor's callback)."""
        while True:
            try:
                self._receive_once()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                # Notifications were lost: what the kernel holds now is the truth again.
                self.overruns += 1
                log.warning("port state: netlink notifications lost; reading the state again")
                self._dumping = None
                self._request_dumps()

    def _receive_once(self) -> None:
        data, sender = self._sock.recvfrom(RECEIVE_BUFFER)
        if isinstance(sender, tuple) and sender and sender[0] != 0:
            return  # not from the kernel (port id 0)
        try:
            messages = parse(data)
        except MalformedNetlink as exc:
            self.malformed += 1
            log.warning("port state: malformed netlink message dropped: %s", exc)
            return
        for message in messages:
            if isinstance(message, DumpEnd) and message.seq == self._dumping:
                if message.error:
                    log.warning(
                        "port state: the kernel refused a dump: %s",
                        errno.errorcode.get(message.error, str(message.error)),
                    )
                self._dumping = None
                self._next_dump()
        for plane, up in self.links.feed(messages):
            self.changes += 1
            name = self.links.interface_name(plane) or "its interface"
            if up:
                log.warning("port state: plane %d (%s) is up: using it again", plane, name)
            else:
                log.warning("port state: plane %d (%s) is down: not using it", plane, name)
            self._on_change(plane, up)

    def _request_dumps(self) -> None:
        # Addresses first: the link dump then finds every plane's interface known.
        self._dumps = [RTM_GETADDR, RTM_GETLINK]
        if self._dumping is None:
            self._next_dump()

    def _next_dump(self) -> None:
        if not self._dumps:
            return
        kind = self._dumps.pop(0)
        self._seq += 1
        self._dumping = self._seq
        self._sock.send(dump_request(kind, self._seq))

    def planes(self) -> list[dict[str, Any]]:
        """Each plane's interface (None: its address is on none) and whether it is up."""
        return [
            {"plane": plane, "interface": self.links.interface_name(plane), "up": up}
            for plane, up in enumerate(self.links.up)
        ]

    def status(self) -> dict[str, Any]:
        """The ``ports`` section of ``mrc-agent status``: the planes and the counters."""
        return {
            "planes": self.planes(),
            "changes": self.changes,
            "netlink_malformed": self.malformed,
            "netlink_overruns": self.overruns,
        }

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()


def _ignore(_plane: int, _up: bool) -> None:
    """``on_change`` before ``start``."""
