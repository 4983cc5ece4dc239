"""Find the topology link an operator means by two node names, as in ``cut l1 s1``.

Each side is a node name (``l1``) or an endpoint (``l1:3``). Two switches may be joined by
parallel links, and a host may have several NICs on one switch: when the names match more than
one link, the error lists them with their ports so the operator can pick one.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.model import Endpoint, Link, Topology


class LinkNotFound(LookupError):
    """The two names match no link, or more than one."""


@dataclass(frozen=True)
class _Side:
    node: str
    port: int | None

    def matches(self, end: Endpoint) -> bool:
        return end.node == self.node and (self.port is None or end.port == self.port)


def find_link(topology: Topology, a: str, b: str) -> Link:
    """The one link between ``a`` and ``b`` (each ``node`` or ``node:port``)."""
    one, other = _parse_side(topology, a), _parse_side(topology, b)
    candidates = [
        link
        for link in topology.all_links
        if (one.matches(link.a) and other.matches(link.b))
        or (one.matches(link.b) and other.matches(link.a))
    ]
    if not candidates:
        raise LinkNotFound(f"no link between {a} and {b} in topology {topology.name!r}")
    if len(candidates) > 1:
        listed = ", ".join(str(link.id) for link in candidates)
        raise LinkNotFound(
            f"{len(candidates)} links between {a} and {b} ({listed}): name a port, e.g. "
            f"{candidates[0].a}"
        )
    return candidates[0]


def _parse_side(topology: Topology, text: str) -> _Side:
    node, sep, port_text = text.partition(":")
    known = {switch.name for switch in topology.switches} | {host.name for host in topology.hosts}
    if node not in known:
        raise LinkNotFound(f"{node!r} is neither a switch nor a host of {topology.name!r}")
    if not sep:
        return _Side(node, None)
    if not port_text.isdigit():
        raise LinkNotFound(f"{text!r}: the port after ':' must be a number")
    return _Side(node, int(port_text))
