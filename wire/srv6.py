"""SRv6 uSID carriers: the outer IPv6 header that carries a packet's path.

Layout of the outer destination (a compressed SID container, RFC 9800's "uSID" form, with a
32-bit block and 16-bit micro-SIDs, as MRC's SRv6 EV format profile lays it out):

    bits 127-96  block: which fabric (plane) the uSIDs belong to
    bits  95-80  the active uSID: the switch that acts next
    bits  79-0   the following uSIDs, then End-of-Carrier (0) filling the rest

Each switch on the path matches block + active uSID, shifts bits 95-0 left by 16 and forwards
toward the new active uSID; the switch that shifts End-of-Carrier into place is the last and
decapsulates (``p4src/include/control/srv6.p4``). A carrier is IPv6-in-IPv6 (next header 41)
or IPv4-in-IPv6 (4): scapy decodes both natively (``IPv6 / IPv6`` and ``IPv6 / IP``); these
helpers build a carrier, read its uSID list, and take it off again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv6Address, IPv6Network

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

#: Width of the block, in bits, and of one uSID.
BLOCK_BITS = 32
USID_BITS = 16
#: How many uSIDs fit after the block: (128 - 32) / 16.
MAX_USIDS = (128 - BLOCK_BITS) // USID_BITS
#: The uSID that ends a carrier: no switch has it.
END_OF_CARRIER = 0
#: Next-header values of a carrier's outer header.
NH_IPV4 = 4
NH_IPV6 = 41


class Srv6Error(ValueError):
    """A block or uSID list that cannot form a carrier, or a packet that is not one."""


@dataclass(frozen=True)
class UsidCarrier:
    """A decoded outer destination: the block and the uSIDs still to act, active first."""

    block: IPv6Network
    usids: tuple[int, ...]

    @property
    def active(self) -> int | None:
        """The uSID of the switch that acts next; None once the list is used up."""
        return self.usids[0] if self.usids else None

    def __str__(self) -> str:
        listed = " ".join(f"{usid:04x}" for usid in self.usids) or "(end)"
        return f"block {self.block} uSIDs {listed}"


def check_block(block: IPv6Network) -> IPv6Network:
    """``block`` if it is a /32 (the carrier's fixed block width); Srv6Error otherwise."""
    if block.prefixlen != BLOCK_BITS:
        raise Srv6Error(f"a uSID block is a /{BLOCK_BITS}, not {block}")
    return block


def carrier_address(block: IPv6Network, usids: Sequence[int]) -> IPv6Address:
    """The outer destination that sends a packet through ``usids`` in order, inside ``block``."""
    check_block(block)
    if not 1 <= len(usids) <= MAX_USIDS:
        raise Srv6Error(f"a carrier holds 1 to {MAX_USIDS} uSIDs, not {len(usids)}")
    value = int(block.network_address)
    for position, usid in enumerate(usids):
        if not 0 < usid <= 0xFFFF:
            raise Srv6Error(f"uSID {usid:#x} is outside 0x0001..0xffff (0 ends the carrier)")
        value |= usid << (128 - BLOCK_BITS - USID_BITS * (position + 1))
    return IPv6Address(value)


def parse_carrier(address: IPv6Address | str) -> UsidCarrier:
    """The block and the uSIDs left in an outer destination, up to End-of-Carrier.

    Srv6Error for a list with a hole (a uSID after End-of-Carrier), which no switch would
    ever reach: the switch before the hole would already have decapsulated.
    """
    value = int(IPv6Address(address))
    block = IPv6Network(((value >> (128 - BLOCK_BITS)) << (128 - BLOCK_BITS), BLOCK_BITS))
    usids = [
        (value >> (128 - BLOCK_BITS - USID_BITS * (position + 1))) & 0xFFFF
        for position in range(MAX_USIDS)
    ]
    live = []
    for position, usid in enumerate(usids):
        if usid == END_OF_CARRIER:
            if any(usids[position:]):
                raise Srv6Error(f"{IPv6Address(value)}: a uSID follows End-of-Carrier")
            break
        live.append(usid)
    return UsidCarrier(block, tuple(live))


def shifted(address: IPv6Address | str) -> IPv6Address:
    """The outer destination after one switch's shift (what that switch forwards)."""
    value = int(IPv6Address(address))
    block_mask = ((1 << BLOCK_BITS) - 1) << (128 - BLOCK_BITS)
    rest = (value << USID_BITS) & ((1 << (128 - BLOCK_BITS)) - 1)
    return IPv6Address((value & block_mask) | rest)


def encapsulate(
    inner: Packet,
    *,
    src: IPv6Address | str,
    block: IPv6Network,
    usids: Sequence[int],
    hop_limit: int = 64,
) -> Packet:
    """``IPv6(outer) / inner`` for an inner IPv4 or IPv6 packet (no Ethernet).

    The outer traffic class is the inner one (DSCP and ECN), as the uniform model of RFC 2983
    and RFC 6040 copy them: the fabric classifies and marks the outer header.
    """
    if isinstance(inner, IPv6):
        tc, nh = int(inner.tc or 0), NH_IPV6
    elif isinstance(inner, IP):
        tc, nh = int(inner.tos or 0), NH_IPV4
    else:
        raise Srv6Error(f"a carrier wraps an IPv4 or IPv6 packet, not {type(inner).__name__}")
    outer = IPv6(src=str(src), dst=str(carrier_address(block, usids)), nh=nh, hlim=hop_limit, tc=tc)
    return outer / inner


def carrier_of(packet: Packet) -> UsidCarrier | None:
    """The decoded carrier of a packet whose first IP header is an SRv6 carrier, else None."""
    outer = packet.getlayer(IPv6)
    if outer is None or outer.nh not in (NH_IPV4, NH_IPV6):
        return None
    return parse_carrier(outer.dst)


def decapsulate(packet: Packet) -> Packet:
    """The inner IP packet of a carrier (Srv6Error if ``packet`` is none)."""
    outer = packet.getlayer(IPv6)
    if outer is None or outer.nh not in (NH_IPV4, NH_IPV6):
        raise Srv6Error("not an SRv6 carrier (no IPv6 header with next header 4 or 41)")
    return outer.payload.copy()
