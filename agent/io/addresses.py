"""Addresses as users type them: plane addresses, peer addresses with optional ports.

A plane address is a literal IP of this host, one per NIC port (plane), in plane order; the core
takes them packed (4 or 16 bytes). A peer is ``HOST[:PORT]``, the address of its side channel;
an IPv6 literal with a port is written ``[ADDR]:PORT``, as in URLs. Every parse failure raises
``UsageError`` with the offending text, so the CLI can report it and exit 2.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from agent.io.errors import PeerUnreachableError, UsageError


@dataclass(frozen=True, slots=True)
class PeerAddress:
    """Where a peer's side channel listens."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_port(text: str, what: str = "port") -> int:
    """A TCP/UDP port number 1-65535."""
    try:
        port = int(text, 10)
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise UsageError(f"{what} {port} is outside 1-65535")
    return port


def parse_peer(text: str, default_port: int) -> PeerAddress:
    """``HOST``, ``HOST:PORT``, ``IPV6`` or ``[IPV6]:PORT``."""
    text = text.strip()
    if not text:
        raise UsageError("empty peer address")
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise UsageError(f"peer address {text!r}: '[' without ']'")
        host, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise UsageError(f"peer address {text!r}: expected ':PORT' after ']'")
        port = parse_port(rest[1:], f"port of {text!r}") if rest else default_port
        _check_ip(host, text)
        return PeerAddress(host, port)
    if text.count(":") > 1:  # a bare IPv6 literal
        _check_ip(text, text)
        return PeerAddress(text, default_port)
    host, _, port_text = text.partition(":")
    if not host:
        raise UsageError(f"peer address {text!r} has no host")
    port = parse_port(port_text, f"port of {text!r}") if port_text else default_port
    return PeerAddress(host, port)


def _check_ip(host: str, original: str) -> None:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(f"peer address {original!r}: {host!r} is not an IP address") from None


def parse_plane_address(text: str) -> bytes:
    """One plane's local address, packed; it must be a usable unicast literal."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        raise UsageError(f"plane address {text!r} is not an IPv4 or IPv6 address") from None
    if address.is_unspecified or address.is_multicast:
        raise UsageError(f"plane address {text!r} must be a unicast address of this host")
    return address.packed


def parse_planes(texts: Sequence[str]) -> tuple[bytes, ...]:
    """Plane addresses in plane order: all of one IP version, no duplicates."""
    packed = tuple(parse_plane_address(t) for t in texts)
    if len({len(p) for p in packed}) > 1:
        raise UsageError("plane addresses must be all IPv4 or all IPv6")
    if len(set(packed)) != len(packed):
        raise UsageError("each plane needs its own address (a plane address is repeated)")
    return packed


def format_address(packed: bytes) -> str:
    """The text form of a packed IPv4/IPv6 address."""
    return str(ipaddress.ip_address(packed))


def resolve(host: str, port: int) -> tuple[socket.AddressFamily, tuple[str, int]]:
    """The first address ``host`` resolves to, for a TCP connection."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise PeerUnreachableError(f"cannot resolve peer {host!r}: {exc.strerror}") from None
    family, _type, _proto, _canon, sockaddr = infos[0]
    return family, (str(sockaddr[0]), int(sockaddr[1]))


def local_address_towards(peer_ip: str) -> bytes:
    """This host's source address for packets to ``peer_ip`` (the routing table's choice).

    Used when no ``--plane`` is given: the host then has one plane, the interface that
    reaches the peer. Connecting a UDP socket sends nothing; it only runs the route lookup.
    """
    family = socket.AF_INET6 if ":" in peer_ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((peer_ip, 9))
        except OSError as exc:
            raise PeerUnreachableError(f"no route to peer {peer_ip}: {exc.strerror}") from None
        return socket.inet_pton(family, probe.getsockname()[0])
