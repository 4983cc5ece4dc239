"""Names and addresses the linux southbound gives things in a switch's namespace.

The runner and the southbound agree on them (the contract of the ``linux`` target): switch
``s1`` of a run with prefix ``mn3fa2`` lives in the network namespace ``mn3fa2-s1``, and its
port N is the interface ``swpN`` there (Cumulus style).

A kernel route needs a gateway *address*, and the kernel finds the gateway's MAC in its
neighbour table; the intent speaks of next hops as (egress port, destination MAC) only, since a
neighbouring switch port or host NIC has no address the switch could route via. So every
next-hop member gets a synthetic gateway address of its own, derived from its member index
(stable for the switch's lifetime), and a permanent neighbour entry on the member's port mapping
that address to the member's destination MAC: the kernel then sends exactly to (port, MAC), never
resolves anything by ARP or neighbour discovery, and what the southbound wrote can be read back
and recognised by its address. IPv4 uses the link-local block 169.254/16, IPv6 a link-local
range whose interface ids carry "MRC" in ASCII (no EUI-64 id can fall there: those have
ff:fe in the middle); IPv4 routes say ``onlink`` because no interface holds a 169.254 address.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

#: Routes the southbound writes carry this routing protocol number (``proto 77`` in ``ip
#: route``; not among iproute2's registered numbers): what it reads back, diffs and deletes is
#: only ever its own, whatever else the namespace holds.
ROUTE_PROTOCOL = 77

#: Synthetic gateways: IPv4 169.254.{1 + i // 250}.{1 + i % 250} for member index i (never
#: .0 or .255, and clear of the reserved 169.254.0/24 and 169.254.255/24), IPv6 the range below
#: plus i + 1.
GATEWAY_NETWORK_V4 = IPv4Network("169.254.0.0/16")
GATEWAY_NETWORK_V6 = IPv6Network("fe80::4d52:4300:0:0/96")
_V4_HOSTS_PER_BLOCK = 250
MAX_MEMBER_INDEX = _V4_HOSTS_PER_BLOCK * 254 - 1

_PORT_INTERFACE = re.compile(r"swp([1-9][0-9]*)")


def namespace_of(prefix: str, switch: str) -> str:
    """The namespace of ``switch`` in a run with ``prefix`` ('' means the switch's own name)."""
    return f"{prefix}-{switch}" if prefix else switch


def port_interface(port: int) -> str:
    """The interface of switch port ``port``."""
    if port < 1:
        raise ValueError(f"switch ports are numbered from 1, not {port}")
    return f"swp{port}"


def interface_port(ifname: str) -> int | None:
    """The switch port an interface stands for, or None for any other interface (lo, ...)."""
    match = _PORT_INTERFACE.fullmatch(ifname)
    return int(match.group(1)) if match else None


def gateway_v4(member_index: int) -> IPv4Address:
    """The synthetic IPv4 gateway of the member with ``member_index``."""
    _check_index(member_index)
    block, host = divmod(member_index, _V4_HOSTS_PER_BLOCK)
    return IPv4Address(f"169.254.{block + 1}.{host + 1}")


def gateway_v6(member_index: int) -> IPv6Address:
    """The synthetic IPv6 (link-local) gateway of the member with ``member_index``."""
    _check_index(member_index)
    return GATEWAY_NETWORK_V6.network_address + member_index + 1


def is_gateway(address: IPv4Address | IPv6Address) -> bool:
    """Whether ``address`` lies where synthetic gateways are made (so a neighbour entry for it
    is the southbound's own)."""
    if isinstance(address, IPv4Address):
        return address in GATEWAY_NETWORK_V4
    return address in GATEWAY_NETWORK_V6


def _check_index(member_index: int) -> None:
    if not 0 <= member_index <= MAX_MEMBER_INDEX:
        raise ValueError(f"member index {member_index} is outside 0..{MAX_MEMBER_INDEX}")
