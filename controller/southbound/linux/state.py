"""What a switch namespace holds, as the linux southbound sees it: plain, comparable data.

The same types describe the wanted state (rendered from an intent by :mod:`.render`) and the
held state (read back by :mod:`.namespace`), so :mod:`.diff` compares like with like.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from controller.southbound.linux.ecn import EcnMarker
from controller.southbound.linux.seg6 import Seg6LocalRoute
from hostenv.tbf import TbfParameters

Prefix = IPv4Network | IPv6Network
Address = IPv4Address | IPv6Address


@dataclass(frozen=True)
class NextHop:
    """One way out: a synthetic gateway on a port (see :mod:`.names`)."""

    port: int
    gateway: Address


@dataclass(frozen=True)
class KernelRoute:
    """A (multipath) route of the southbound's own protocol; next hops sorted by port."""

    prefix: Prefix
    nexthops: tuple[NextHop, ...]


@dataclass(frozen=True)
class Neighbour:
    """A permanent neighbour entry: ``address`` on ``port`` is ``mac`` (lower case)."""

    port: int
    address: Address
    mac: str

    @property
    def key(self) -> tuple[int, Address]:
        """Identity in the neighbour table: one entry per (interface, address)."""
        return self.port, self.address


@dataclass(frozen=True)
class KernelState:
    """Routes by prefix, neighbours by (port, address), shapers (root ``tbf``) by port, ECN
    markers (the ``tbf``'s child, :mod:`.ecn`) by port, SRv6 seg6local routes (:mod:`.seg6`)
    by prefix."""

    routes: Mapping[Prefix, KernelRoute] = field(default_factory=dict)
    neighbours: Mapping[tuple[int, Address], Neighbour] = field(default_factory=dict)
    shapers: Mapping[int, TbfParameters] = field(default_factory=dict)
    markers: Mapping[int, EcnMarker] = field(default_factory=dict)
    seg6local: Mapping[IPv6Network, Seg6LocalRoute] = field(default_factory=dict)
