"""Sending in SRv6 uSID mode: each datagram wrapped in the outer IPv6 header of its path.

The carrier is IPv6-in-IPv6 (next header 41): the outer header's destination is the path's
uSID list (``agent.io.srv6_carriers``), its source this host's plane address; the inner
header and UDP datagram are exactly what ``RawSender`` sends in every other mode, so the ICRC,
computed over the inner header, is the same, and the receiver, to whom the last switch hands
the inner packet (docs/routing.md), sees no difference. The outer header copies the inner
traffic class (RFC 2983's uniform model: the fabric classifies, marks ECN and trims by the
outer header) and the EV's flow label.

With ``IPV6_HDRINCL`` the kernel sends the whole packet as written and routes it by the
address it is sent to, the carrier: the testbed's hosts route each plane's uSID block
(``fcbb:bbPP::/32``) to the plane's switch. Every datagram goes by one ``sendmsg`` (no
``sendmmsg`` batch): a BMv2 fabric forwards tens of times fewer packets than that costs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Final

from agent.core.datagram import OutgoingDatagram
from agent.core.send_slots import SendSlots
from agent.io.raw_sender import DEFAULT_TTL, RawSender, ipv6_udp_header
from agent.io.srv6_carriers import Srv6Carriers, is_answer

_OUTER: Final = struct.Struct(">IHBB16s16s")
_NH_IPV6: Final = 41


def outer_header(datagram: OutgoingDatagram, carrier: bytes, inner_length: int) -> bytes:
    """The 40-byte outer IPv6 header in front of an ``inner_length``-byte inner packet."""
    tclass = (datagram.dscp << 2) | datagram.ecn
    first_word = (6 << 28) | (tclass << 20) | (datagram.flow_label & 0xFFFFF)
    return _OUTER.pack(first_word, inner_length, _NH_IPV6, DEFAULT_TTL, datagram.ip.src, carrier)


class Srv6Sender:
    """A ``RawSender`` over IPv6 whose every datagram goes in the carrier of its EV's path
    (composed, not derived: ``RawSender`` is compiled with mypyc)."""

    def __init__(self, carriers: Srv6Carriers, raw: RawSender | None = None) -> None:
        #: The raw socket's owner (``raw``: a stand-in, for tests).
        self.raw = raw if raw is not None else RawSender(batch=False)
        self.carriers = carriers
        #: Datagrams sent in a carrier, and sent without one (a peer off the topology).
        self.in_carrier = 0
        self.without_carrier = 0

    @property
    def sent(self) -> int:
        """Datagrams the kernel took."""
        return self.raw.sent

    @property
    def send_errors(self) -> dict[str, int]:
        """Datagrams dropped, by errno name."""
        return self.raw.send_errors

    def open(self, ipv4: bool, ipv6: bool) -> None:
        """Open the IPv6 socket; ValueError for IPv4 (a carrier holds IPv6 here)."""
        if ipv4:
            raise ValueError("SRv6 mode runs over IPv6: give IPv6 plane addresses")
        self.raw.open(ipv4=False, ipv6=ipv6)

    def filenos(self) -> list[int]:
        """See ``RawSender.filenos``."""
        return self.raw.filenos()

    def send(self, datagram: OutgoingDatagram) -> bool:
        """Send ``datagram`` in its carrier (``RawSender.send`` semantics: False when the
        socket buffer is full; other errors counted and the datagram dropped)."""
        ip = datagram.ip
        carrier = self.carriers.carrier(ip.src, ip.dst, datagram.ev, is_answer(datagram.payload))
        before = self.raw.sent
        if carrier is None:
            taken = self.raw.send(datagram)
            self.without_carrier += self.raw.sent - before
            return taken
        inner = ipv6_udp_header(datagram)
        header = outer_header(datagram, carrier, len(inner) + len(datagram.payload))
        taken = self.raw.send_packet((header + inner, datagram.payload), carrier, datagram)
        self.in_carrier += self.raw.sent - before
        return taken

    def send_many(self, datagrams: Sequence[OutgoingDatagram], start: int = 0) -> int:
        """``send`` for each in turn; the index of the first the socket buffer refused."""
        for index in range(start, len(datagrams)):
            if not self.send(datagrams[index]):
                return index
        return len(datagrams)

    def make_slots(self, sink: Callable[[SendSlots], None]) -> SendSlots | None:
        """None: the core hands every datagram over as an object, to be wrapped here."""
        return None

    def send_slots(self, slots: SendSlots) -> int:
        """Never called (``make_slots`` gives none)."""
        raise RuntimeError("send_slots without make_slots")

    def counters(self) -> dict[str, object]:
        """Datagrams sent in a carrier and without one (for ``mrc-agent status``)."""
        sent = {"in_carrier": self.in_carrier, "without_carrier": self.without_carrier}
        return {"srv6_carriers": sent}

    def close(self) -> None:
        """Close the socket."""
        self.raw.close()
