"""A datagram in flight through the simulated fabric: the bytes plus the IP/UDP header fields
switches look at (DSCP, ECN, EV) and may rewrite (DSCP and length on a trim, ECN on a mark)."""

from __future__ import annotations

from agent.core.datagram import IncomingDatagram, IpContext, OutgoingDatagram
from wire.entropy import ev_from_headers

#: Bytes a datagram occupies on a link besides its UDP payload: UDP 8, Ethernet header + FCS 18.
_UDP_ETHERNET_OVERHEAD = 8 + 18


class SimPacket:
    """One datagram crossing the simulated network."""

    __slots__ = (
        "dscp",
        "dst_port",
        "ecn",
        "flow_label",
        "ip",
        "payload",
        "plane",
        "src_port",
        "trimmed_at",
    )

    def __init__(self, datagram: OutgoingDatagram) -> None:
        self.payload = datagram.payload
        self.ip = datagram.ip
        self.plane = datagram.plane
        self.src_port = datagram.src_port
        self.dst_port = datagram.dst_port
        self.flow_label = datagram.flow_label
        self.dscp = datagram.dscp
        self.ecn = datagram.ecn
        self.trimmed_at: str | None = None

    @property
    def ev(self) -> int:
        """The EV the packet travels on (what ECMP hashes)."""
        return ev_from_headers(self.src_port, self.flow_label)

    @property
    def wire_size(self) -> int:
        """Bytes on the link: IP header, UDP, Ethernet and the payload."""
        ip_header = 40 if self.ip.is_ipv6 else 20
        return len(self.payload) + ip_header + _UDP_ETHERNET_OVERHEAD

    def copy(self) -> SimPacket:
        """A duplicate (for links that duplicate packets)."""
        twin = SimPacket(
            OutgoingDatagram(
                payload=self.payload,
                ip=self.ip,
                plane=self.plane,
                src_port=self.src_port,
                flow_label=self.flow_label,
                dscp=self.dscp,
                ecn=self.ecn,
                dst_port=self.dst_port,
            )
        )
        twin.trimmed_at = self.trimmed_at
        return twin

    def received(self) -> IncomingDatagram:
        """The datagram as the destination host's stack hands it over."""
        return IncomingDatagram(
            payload=self.payload,
            ip=IpContext(self.ip.src, self.ip.dst, self.ip.ip_id, self.ip.flags_fragment),
            src_port=self.src_port,
            dscp=self.dscp,
            ecn=self.ecn,
            flow_label=self.flow_label,
            dst_port=self.dst_port,
        )
