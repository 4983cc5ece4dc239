"""Preallocated room into which the core writes outgoing IPv4 data packets in place.

Why: at a few hundred thousand data packets per second, handing each one over as an
``OutgoingDatagram`` (the encoded UDP payload as a new ``bytes``, the object, then the
runtime's loop reading its fields back to pack the IP/UDP header and copy the payload into a
``sendmmsg`` slot) costs the sender close to a microsecond of Python per packet. With
``SendSlots`` the data encoder writes the finished IP packet (IPv4 + UDP header, BTH through
ICRC) straight into the runtime's send buffer, and the runtime only sets the destinations and
makes the system call.

The object is plain Python, handed in by the runtime (``agent.io``): a writable buffer with
``capacity`` slots of ``slot_size`` bytes, where each slot's length goes (a ``struct`` at
``slot * length_stride + length_offset`` of ``lengths``: the ``iov_len`` of a ``sendmmsg``
vector, say), the TTL to write, and ``sink``: called with this object whenever it is full and
once the core is done, to send (or keep) slots ``0..count-1`` and ``clear`` them. The core
never learns what the sink does with them. Packets are written in the order they are to be
sent. Only IPv4 paths use it (an IPv6 UDP checksum covers the payload and is left to the
runtime's one-datagram path); the headers are exactly those the runtime's raw sender writes
for an ``OutgoingDatagram`` (ID and flags from the ``IpContext``, checksums 0: the kernel fills
in the IPv4 header's, and a zero UDP checksum is allowed over IPv4). The runtime also
``append``s the turn's control packets (SACKs, probes, answers) behind the data, so that a turn
makes one ``sendmmsg`` rather than two.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from agent.core.datagram import IpContext, OutgoingDatagram

#: IPv4 header (20) + UDP header (8) in front of each slot's UDP payload.
IPV4_UDP_HEADER_LEN: Final = 28
_TOS_OFFSET: Final = 1
_SRC_PORT: Final = struct.Struct(">H")
_SRC_PORT_OFFSET: Final = 20
_DST_PORT_OFFSET: Final = 22
_IPV4_UDP: Final = struct.Struct(">BBHHHBBH4s4sHHHH")
_IPV4_HEADER_LEN: Final = 20
_UDP_HEADER_LEN: Final = 8
_IP_PROTO_UDP: Final = 17


def pack_ipv4_udp_header(
    buffer: bytearray | memoryview, offset: int, datagram: OutgoingDatagram, ttl: int
) -> None:
    """Write the IPv4 + UDP header (``IPV4_UDP_HEADER_LEN`` bytes) in front of an IPv4
    ``datagram``'s payload at ``offset`` of ``buffer``: ID and flags from its ``IpContext``,
    TOS from its DSCP and ECN, checksums 0 (with ``IP_HDRINCL`` the kernel fills in the IPv4
    one; a zero UDP checksum is allowed over IPv4). The one place this header is laid out for
    a datagram: the raw sender's paths and ``SendSlots.append`` all write it through here."""
    ip = datagram.ip
    udp_length = _UDP_HEADER_LEN + len(datagram.payload)
    _IPV4_UDP.pack_into(
        buffer, offset, 0x45, (datagram.dscp << 2) | datagram.ecn, _IPV4_HEADER_LEN + udp_length,
        ip.ip_id, ip.flags_fragment, ttl, _IP_PROTO_UDP, 0, ip.src, ip.dst, datagram.src_port,
        datagram.dst_port, udp_length, 0,
    )  # fmt: skip


class SendSlots:
    """``capacity`` outgoing IPv4 packets written in place; see the module doc.

    ``count`` slots are filled; ``contexts[i]`` and ``planes[i]`` say where slot ``i`` goes
    (its ``IpContext``, whose ``dst`` the sink needs for the destination address, and the
    plane it leaves from). ``written`` counts every packet ever written (the endpoint's
    ``datagrams_sent`` takes it from there).
    """

    __slots__ = (
        "buffer",
        "capacity",
        "contexts",
        "count",
        "length_offset",
        "length_stride",
        "length_struct",
        "lengths",
        "planes",
        "sink",
        "slot_size",
        "ttl",
        "written",
    )

    def __init__(
        self,
        buffer: memoryview,
        slot_size: int,
        capacity: int,
        lengths: memoryview,
        length_struct: struct.Struct,
        length_stride: int,
        length_offset: int,
        sink: Callable[[SendSlots], None],
        ttl: int = 64,
    ) -> None:
        if capacity < 1 or slot_size < IPV4_UDP_HEADER_LEN:
            raise ValueError("need at least one slot that holds the IPv4 and UDP headers")
        if len(buffer) < capacity * slot_size:
            raise ValueError("buffer smaller than capacity * slot_size")
        self.buffer = buffer
        self.slot_size = slot_size
        self.capacity = capacity
        self.lengths = lengths
        self.length_struct = length_struct
        self.length_stride = length_stride
        self.length_offset = length_offset
        self.sink = sink
        self.ttl = ttl
        self.count = 0
        self.written = 0
        self.contexts: list[IpContext] = []
        self.planes: list[int] = []

    def flush(self) -> None:
        """Hand the filled slots to the sink (which sends or keeps them and calls ``clear``)."""
        if self.count:
            self.sink(self)

    def append(self, datagram: OutgoingDatagram) -> bool:
        """Write ``datagram`` (a packet the core handed over as an object: a SACK, a probe)
        into the next slot, flushing first if none is free; False, writing nothing, if it
        cannot go in a slot (an IPv6 path, or too long), to be sent the one-at-a-time way.

        Why: a turn's control packets then leave in the same ``sendmmsg`` as its data
        instead of a system call of their own. ``written`` does not count them (it counts
        what the core wrote; the caller counted these when it got them as objects).
        """
        ip = datagram.ip
        payload = datagram.payload
        size = len(payload)
        if len(ip.dst) != 4 or IPV4_UDP_HEADER_LEN + size > self.slot_size:
            return False
        if self.count == self.capacity:
            self.flush()
        count = self.count
        offset = count * self.slot_size
        pack_ipv4_udp_header(self.buffer, offset, datagram, self.ttl)
        start = offset + IPV4_UDP_HEADER_LEN
        self.buffer[start : start + size] = payload
        self.length_struct.pack_into(
            self.lengths, count * self.length_stride + self.length_offset,
            IPV4_UDP_HEADER_LEN + size,
        )  # fmt: skip
        self.contexts.append(ip)
        self.planes.append(datagram.plane)
        self.count = count + 1
        return True

    def clear(self) -> None:
        """Every slot is free again (the sink calls it once it is done with them)."""
        self.count = 0
        self.contexts.clear()
        self.planes.clear()

    def length(self, slot: int) -> int:
        """Bytes of IP packet in ``slot``."""
        offset = slot * self.length_stride + self.length_offset
        return int(self.length_struct.unpack_from(self.lengths, offset)[0])

    def datagram(self, slot: int) -> OutgoingDatagram:
        """Slot ``slot`` as the ``OutgoingDatagram`` the one-at-a-time path would have made
        (for a sink that must keep it: a full socket buffer, a backlog to queue behind)."""
        start = slot * self.slot_size
        packet = self.buffer[start : start + self.length(slot)]
        tos = packet[_TOS_OFFSET]
        return OutgoingDatagram(
            bytes(packet[IPV4_UDP_HEADER_LEN:]),
            self.contexts[slot],
            self.planes[slot],
            _SRC_PORT.unpack_from(packet, _SRC_PORT_OFFSET)[0],
            0,
            tos >> 2,
            tos & 3,
            _SRC_PORT.unpack_from(packet, _DST_PORT_OFFSET)[0],
        )
