"""SRv6 uSID carriers on a kernel switch: the seg6local routes that stand for ``my_usid``.

Pure. ``mrc.p4`` matches block + active uSID, shifts the rest left by 16 bits and forwards on
the next uSID; when nothing is left it decapsulates and routes the inner packet. The kernel
does the same with two seg6local routes per local uSID (Linux 6.1 and later, built with
``CONFIG_IPV6_SEG6_LWTUNNEL``):

* ``BLOCK:USID::/48``: ``End`` with the NEXT-C-SID flavour (32-bit block, 16-bit uSIDs): the
  kernel shifts the uSIDs after this one into place and looks the new destination up, which
  finds the plain ``BLOCK:NEXT::/48`` route toward that neighbour (``usid_next``, rendered as
  an ordinary route by :mod:`.render`);
* ``BLOCK:USID::/128``: ``End.DT6`` in the main table. A carrier whose only uSID left is this
  switch's has exactly this destination; the more specific route wins over the ``End`` one
  (which would fall back to classic End and drop it for want of a segment routing header),
  removes the outer header and routes the inner IPv6 packet by its host route, as the last
  switch does in ``mrc.p4``. The agents send IPv6 carriers only, so DT6 suffices.

pyroute2 cannot write the NEXT-C-SID flavour, so :mod:`.namespace` writes these routes with
iproute2 (:meth:`Seg6LocalRoute.ip_arguments`), on a dummy device of their own
(:data:`ROUTE_DEVICE`), and reads them back with pyroute2, by action and table
(:func:`seg6local_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from ipaddress import IPv6Address, IPv6Network
from typing import Any

from controller.intent.model import LocalUsid

#: ``LWTUNNEL_ENCAP_SEG6_LOCAL`` (linux/lwtunnel.h): a route's encapsulation type.
LWTUNNEL_ENCAP_SEG6_LOCAL = 7
#: The main routing table, where End.DT6 looks the inner packet up.
MAIN_TABLE = 254
#: uSID geometry, as ``topologies.paths`` lays the carrier out: a 32-bit block, 16-bit uSIDs.
BLOCK_BITS = 32
USID_BITS = 16
#: The device the seg6local routes name: a dummy interface the southbound makes in the
#: namespace. Not ``lo``: IPv6 turns a route via the loopback device into a reject route, and
#: not a port, whose carrier loss would take the routes out of use.
ROUTE_DEVICE = "usid0"


class Seg6Action(Enum):
    """The seg6local behaviours used, by their ``SEG6_LOCAL_ACTION`` number."""

    END = 1  # End, with the NEXT-C-SID flavour: shift, then route the next uSID
    END_DT6 = 7  # End.DT6: decapsulate, route the inner IPv6 packet in a table

    @property
    def label(self) -> str:
        """iproute2's name for the action."""
        return {Seg6Action.END: "End", Seg6Action.END_DT6: "End.DT6"}[self]


#: ``SEG6_LOCAL_FLAVORS`` (linux/seg6_local.h), which pyroute2 does not name.
SEG6_LOCAL_FLAVORS = 11
#: An attribute's type without the NLA_F_NESTED and NLA_F_NET_BYTEORDER flags.
NLA_TYPE_MASK = 0x3FFF


@dataclass(frozen=True, order=True)
class Seg6LocalRoute:
    """A seg6local route of the southbound's protocol; ``table`` only for End.DT6, and
    ``next_csid`` (the flavour) only for End."""

    prefix: IPv6Network
    action: Seg6Action
    table: int | None = None
    next_csid: bool = False

    def ip_arguments(self) -> tuple[str, ...]:
        """What follows ``ip -6 route replace PREFIX`` to write this route."""
        behaviour: tuple[str, ...] = ()
        if self.action is Seg6Action.END_DT6:
            behaviour = ("table", str(self.table))
        elif self.next_csid:
            behaviour = (
                "flavors", "next-csid", "lblen", str(BLOCK_BITS), "nflen", str(USID_BITS),
            )  # fmt: skip
        return ("encap", "seg6local", "action", self.action.label, *behaviour, "dev", ROUTE_DEVICE)


def local_usid_routes(usids: Iterable[LocalUsid]) -> tuple[Seg6LocalRoute, ...]:
    """The two routes of each of a switch's own uSIDs: shift-and-forward, and the last hop."""
    routes = []
    for local in usids:
        locator = usid_locator(local.block, local.usid)
        routes.append(Seg6LocalRoute(locator, Seg6Action.END, next_csid=True))
        routes.append(
            Seg6LocalRoute(IPv6Network(locator.network_address), Seg6Action.END_DT6, MAIN_TABLE)
        )
    return tuple(sorted(routes, key=lambda route: (route.prefix, route.action.value)))


def usid_locator(block: IPv6Network, usid: int) -> IPv6Network:
    """``BLOCK:USID::/48``: every carrier whose active uSID is ``usid`` in ``block``."""
    if block.prefixlen != BLOCK_BITS:
        raise ValueError(f"uSID block {block} is not a /{BLOCK_BITS}")
    if not 0 < usid < 1 << USID_BITS:
        raise ValueError(f"uSID {usid} does not fit {USID_BITS} bits (0 is End-of-Carrier)")
    shift = 128 - BLOCK_BITS - USID_BITS
    address = IPv6Address(int(block.network_address) | usid << shift)
    return IPv6Network((address, BLOCK_BITS + USID_BITS))


def seg6local_of(message: Any, prefix: IPv6Network) -> Seg6LocalRoute | None:
    """The seg6local route a pyroute2 route message of the southbound's protocol holds, or
    None when it has another encapsulation or none. An action this module never writes, or
    none, reads back as End.DT6 without a table, so the diff rewrites it. An End route counts
    as NEXT-C-SID when it carries the flavour attribute (a kernel older than 6.1 keeps the
    route but drops the flavour, and the diff then sees the difference); its fields are not
    decoded (pyroute2 cannot), so lengths written by another hand would pass."""
    if message.get("encap_type") != LWTUNNEL_ENCAP_SEG6_LOCAL:
        return None
    encap = message.get("encap")
    unknown = Seg6LocalRoute(prefix, Seg6Action.END_DT6, None)
    if encap is None:
        return unknown
    try:
        action = Seg6Action(_value(encap.get("SEG6_LOCAL_ACTION")))
    except ValueError:
        return unknown
    if action is Seg6Action.END_DT6:
        return Seg6LocalRoute(prefix, action, _value(encap.get("SEG6_LOCAL_TABLE")))
    return Seg6LocalRoute(prefix, action, next_csid=_has_flavours(encap))


def _has_flavours(encap: Any) -> bool:
    for name, value in encap.get("attrs", ()):
        if name == "SEG6_LOCAL_FLAVORS":
            return True
        kind = value.get("header", {}).get("type", 0) if name == "UNKNOWN" else 0
        if kind & NLA_TYPE_MASK == SEG6_LOCAL_FLAVORS:  # the kernel sets NLA_F_NESTED on it
            return True
    return False


def _value(attribute: Any) -> int | None:
    """An attribute pyroute2 decoded as ``{'value': N}`` or as a plain number."""
    if attribute is None:
        return None
    if isinstance(attribute, int):
        return attribute
    value = attribute.get("value")
    return int(value) if value is not None else None
