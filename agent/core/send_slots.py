"""Preallocated room into which the core writes outgoing MRC datagrams in place.

Why: at a few hundred thousand data packets per second, handing each one over as an
``OutgoingDatagram`` (the encoded UDP payload as a new ``bytes``, the object, then the
runtime's loop reading its fields back and copying the payload into a ``sendmmsg`` slot)
is a large share of the sender's per-packet work. With ``SendSlots`` the data encoder writes
the MRC datagram (BTH through ICRC) straight into the I/O layer's send buffer, and the I/O
layer only puts its headers in front and makes the system call.

The object is plain Python, handed in by the I/O layer (``agent.io``): a writable buffer with
``capacity`` slots of ``slot_size`` bytes, whose first ``header_room`` bytes the I/O layer
keeps for the IP and UDP headers it writes itself (the core never learns their layout, nor
the TTL); and ``sink``: called with this object whenever it is full and once the core is
done, to send (or keep) slots ``0..count-1`` and ``clear`` them. For each slot the core fills
in its ``Envelope``: where the datagram goes and how (IP context, plane, ports, DSCP, ECN) and
how long it is. Packets are written in the order they are to be sent. Only IPv4 paths use it
unless ``takes_ipv6`` (an IPv6 UDP checksum covers the payload, which the raw sender's
one-datagram path computes). The runtime also ``append``s the turn's control packets (SACKs,
probes, answers) behind the data, so that a turn makes one ``sendmmsg`` rather than two.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.core.datagram import IpContext, OutgoingDatagram
from wire.constants import ROCEV2_UDP_PORT

_NO_PATH = IpContext(src=bytes(4), dst=bytes(4))


class Envelope:
    """What the I/O layer needs to send the MRC datagram in one slot: the ``OutgoingDatagram``
    fields, less the payload, plus ``length``, the datagram's size in bytes.

    One per slot, made once and refilled: the data path sets them for every packet.
    """

    __slots__ = ("dscp", "dst_port", "ecn", "flow_label", "ip", "length", "plane", "src_port")

    def __init__(self) -> None:
        self.ip = _NO_PATH
        self.plane = 0
        self.src_port = 0
        self.flow_label = 0
        self.dscp = 0
        self.ecn = 0
        self.dst_port = ROCEV2_UDP_PORT
        self.length = 0

    def fill(
        self,
        ip: IpContext,
        plane: int,
        src_port: int,
        flow_label: int,
        dscp: int,
        ecn: int,
        dst_port: int,
        length: int,
    ) -> None:
        """Set every field (positional: the data path calls it for every packet)."""
        self.ip = ip
        self.plane = plane
        self.src_port = src_port
        self.flow_label = flow_label
        self.dscp = dscp
        self.ecn = ecn
        self.dst_port = dst_port
        self.length = length


class SendSlots:
    """``capacity`` outgoing MRC datagrams written in place; see the module doc.

    ``count`` slots are filled; slot ``i``'s datagram starts at ``i * slot_size +
    header_room`` of ``buffer`` and ``envelopes[i]`` says where it goes. ``written`` counts
    every packet the core ever wrote (the endpoint's ``datagrams_sent`` takes it from there).
    """

    __slots__ = (
        "buffer",
        "capacity",
        "count",
        "envelopes",
        "header_room",
        "sink",
        "slot_size",
        "takes_ipv6",
        "written",
    )

    def __init__(
        self,
        buffer: memoryview,
        slot_size: int,
        capacity: int,
        header_room: int,
        sink: Callable[[SendSlots], None],
        takes_ipv6: bool = False,
    ) -> None:
        if capacity < 1 or not 0 <= header_room <= slot_size:
            raise ValueError("need at least one slot that holds the I/O layer's headers")
        if len(buffer) < capacity * slot_size:
            raise ValueError("buffer smaller than capacity * slot_size")
        self.buffer = buffer
        self.slot_size = slot_size
        self.capacity = capacity
        self.header_room = header_room
        self.sink = sink
        self.takes_ipv6 = takes_ipv6
        self.count = 0
        self.written = 0
        self.envelopes = [Envelope() for _ in range(capacity)]

    @property
    def room(self) -> int:
        """Bytes of MRC datagram a slot holds."""
        return self.slot_size - self.header_room

    def takes(self, ip: IpContext) -> bool:
        """Whether datagrams on path ``ip`` may go in a slot."""
        return self.takes_ipv6 or len(ip.dst) == 4

    def flush(self) -> None:
        """Hand the filled slots to the sink (which sends or keeps them and calls ``clear``)."""
        if self.count:
            self.sink(self)

    def append(self, datagram: OutgoingDatagram) -> bool:
        """Write ``datagram`` (a packet the core handed over as an object: a SACK, a probe)
        into the next slot, flushing first if none is free; False, writing nothing, if it
        cannot go in a slot (an IPv6 path the slots do not take, or too long), to be sent the
        one-at-a-time way.

        Why: a turn's control packets then leave in the same ``sendmmsg`` as its data
        instead of a system call of their own. ``written`` does not count them (it counts
        what the core wrote; the caller counted these when it got them as objects).
        """
        ip = datagram.ip
        payload = datagram.payload
        size = len(payload)
        if not self.takes(ip) or size > self.room:
            return False
        if self.count == self.capacity:
            self.flush()
        count = self.count
        start = count * self.slot_size + self.header_room
        self.buffer[start : start + size] = payload
        self.envelopes[count].fill(
            ip, datagram.plane, datagram.src_port, datagram.flow_label, datagram.dscp,
            datagram.ecn, datagram.dst_port, size,
        )  # fmt: skip
        self.count = count + 1
        return True

    def clear(self) -> None:
        """Every slot is free again (the sink calls it once it is done with them)."""
        self.count = 0

    def payload(self, slot: int) -> memoryview:
        """The MRC datagram in ``slot`` (a view of the buffer: valid until the slot is reused)."""
        start = slot * self.slot_size + self.header_room
        return self.buffer[start : start + self.envelopes[slot].length]

    def datagram(self, slot: int) -> OutgoingDatagram:
        """Slot ``slot`` as the ``OutgoingDatagram`` the one-at-a-time path would have made
        (for a sink that must keep it: a full socket buffer, a backlog to queue behind)."""
        envelope = self.envelopes[slot]
        return OutgoingDatagram(
            bytes(self.payload(slot)), envelope.ip, envelope.plane, envelope.src_port,
            envelope.flow_label, envelope.dscp, envelope.ecn, envelope.dst_port,
        )  # fmt: skip
