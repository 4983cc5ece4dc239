"""What crosses the boundary of the sans-IO core: datagrams in and out, with their IP context.

The core never touches a socket. The runtime (or the simulator) hands it each received UDP
payload together with what the IP and UDP headers said, and sends each outgoing payload with
exactly the header fields given here. Two reasons the IP context travels with the payload:

* the ICRC covers the IP and UDP headers (masked), so the core needs them to compute and check
  it; the runtime therefore sends with a hand-built IPv4 header, ID 0 and DF set (the defaults
  of ``IpContext``), so both sides can rebuild the same pseudo-header;
* the EV is not in the MRC payload at all: it is the UDP source port (EV bits 31-16) and, over
  IPv6, the low 16 bits of the flow label (EV bits 15-0), the mapping of ``wire.entropy``.
  Over IPv4 an EV's low 16 bits are always 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from wire.constants import ROCEV2_UDP_PORT
from wire.entropy import ev_from_headers

#: IPv4 flags/fragment-offset word with only DF set: the runtime's raw sender writes this.
IPV4_DONT_FRAGMENT = 0x4000


@dataclass(frozen=True, slots=True)
class IpContext:
    """The IP header fields the ICRC covers: addresses (4 bytes for IPv4, 16 for IPv6, packed),
    and for IPv4 the identification and the flags/fragment-offset word. TOS/traffic class, TTL,
    hop limit, flow label and checksums are masked by the ICRC and so are not needed here."""

    src: bytes
    dst: bytes
    ip_id: int = 0
    flags_fragment: int = IPV4_DONT_FRAGMENT

    @property
    def is_ipv6(self) -> bool:
        """Whether this is an IPv6 context (16-byte addresses)."""
        return len(self.src) == 16


@dataclass(init=False, slots=True)
class IncomingDatagram:
    """A received UDP datagram to port 4791, as the runtime saw it.

    Treat as immutable; not frozen, for speed (one per datagram, see ``agent.core.packets``).
    Its ``__init__`` is written out rather than generated: mypyc compiles a written one but runs
    a generated one as Python, several times slower.

    ``dscp`` and ``ecn`` come from the IP TOS / traffic-class byte: the DSCP tells a trimmed
    packet apart (it then has no payload and no ICRC), the ECN bits carry the CE mark that the
    receiver echoes. ``flow_label`` is 0 over IPv4.
    """

    payload: bytes
    ip: IpContext
    src_port: int
    dscp: int
    ecn: int
    flow_label: int
    dst_port: int

    def __init__(
        self,
        payload: bytes,
        ip: IpContext,
        src_port: int,
        dscp: int,
        ecn: int,
        flow_label: int = 0,
        dst_port: int = ROCEV2_UDP_PORT,
    ) -> None:
        self.payload = payload
        self.ip = ip
        self.src_port = src_port
        self.dscp = dscp
        self.ecn = ecn
        self.flow_label = flow_label
        self.dst_port = dst_port

    @property
    def ev(self) -> int:
        """The EV this datagram arrived on."""
        return ev_from_headers(self.src_port, self.flow_label)


@dataclass(init=False, slots=True)
class OutgoingDatagram:
    """A UDP datagram the runtime must send exactly as described.

    Treat as immutable; not frozen, for speed (one per datagram, see ``agent.core.packets``);
    its ``__init__`` written out for mypyc, as ``IncomingDatagram``'s.

    ``plane`` is the index of the local address (NIC port) it leaves from, ``ip.src`` that
    address; ``src_port`` / ``flow_label`` carry the EV; ``dscp`` is its traffic class and
    ``ecn`` the ECN code point to set (ECT(0) on data so switches can mark it).
    """

    payload: bytes
    ip: IpContext
    plane: int
    src_port: int
    flow_label: int
    dscp: int
    ecn: int
    dst_port: int

    def __init__(
        self,
        payload: bytes,
        ip: IpContext,
        plane: int,
        src_port: int,
        flow_label: int,
        dscp: int,
        ecn: int,
        dst_port: int = ROCEV2_UDP_PORT,
    ) -> None:
        self.payload = payload
        self.ip = ip
        self.plane = plane
        self.src_port = src_port
        self.flow_label = flow_label
        self.dscp = dscp
        self.ecn = ecn
        self.dst_port = dst_port

    @property
    def ev(self) -> int:
        """The EV this datagram travels on."""
        return ev_from_headers(self.src_port, self.flow_label)
