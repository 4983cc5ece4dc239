"""The DSCP value of each traffic class: the one type agents, switches and topologies share.

Switches classify by DSCP alone (never by opcode), so the agents that mark packets and the
switches that queue, trim and re-mark them must agree on every value: MRC's six classes and the
standard RoCEv2 baseline's three (data, ACK/NAK, CNP). A topology's ``settings.dscp`` is parsed
into a ``DscpMap``, programmed into the switches and handed to every agent (``mrc-agent serve
--dscp``); the defaults are ``DscpClass``'s and ``RoceDscp``'s.

What a switch does with each class (``p4src/include/control/``): MRC data is ECN-marked and
trimmed, trimmed headers and MRC control ride the high-priority queue; RoCE data rides the
lossless class (a deep queue of its own: no congestion drops; pause frames not modelled), is
ECN-marked and never trimmed, and RoCE ACK/NAKs and CNPs ride the high-priority queue, never
marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from wire.constants import DscpClass, RoceDscp

#: A traffic class, named by the enum member whose value is its default DSCP.
TrafficClass = DscpClass | RoceDscp


def class_key(traffic_class: TrafficClass) -> str:
    """The name of a class as ``DscpMap`` fields, topology keys and ``--dscp`` spell it
    (``trimmable``, ``control``, ``roce_data``, ...)."""
    prefix = "roce_" if isinstance(traffic_class, RoceDscp) else ""
    return prefix + traffic_class.name.lower()


@dataclass(frozen=True, slots=True)
class DscpMap:
    """DSCP value of each traffic class (MRC's six, then RoCE's three); distinct values in 0-63
    (``ValueError``)."""

    trimmable: int = int(DscpClass.TRIMMABLE)
    trimmable_retx: int = int(DscpClass.TRIMMABLE_RETX)
    no_trim: int = int(DscpClass.NO_TRIM)
    trimmed: int = int(DscpClass.TRIMMED)
    trimmed_lasthop: int = int(DscpClass.TRIMMED_LASTHOP)
    control: int = int(DscpClass.CONTROL)
    roce_data: int = int(RoceDscp.DATA)
    roce_ack: int = int(RoceDscp.ACK)
    roce_cnp: int = int(RoceDscp.CNP)

    def __post_init__(self) -> None:
        values = self.values()
        for name, value in values.items():
            if not 0 <= value <= 63:
                raise ValueError(f"DSCP {name}={value} out of range 0-63")
        seen: dict[int, str] = {}
        for name, value in values.items():
            if value in seen:
                raise ValueError(f"DSCP value {value} is used by both {seen[value]!r} and {name!r}")
            seen[value] = name

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The class names, as fields, topology keys and ``--dscp`` keys spell them."""
        return tuple(field.name for field in fields(cls))

    def values(self) -> dict[str, int]:
        """Each class name with its value."""
        return {name: getattr(self, name) for name in self.names()}

    def by_class(self) -> dict[TrafficClass, int]:
        """Each class (named by its :class:`DscpClass` or :class:`RoceDscp` member) with its
        configured value."""
        members: tuple[TrafficClass, ...] = (*DscpClass, *RoceDscp)
        return {member: getattr(self, class_key(member)) for member in members}

    def replace(self, changes: Mapping[str, int]) -> DscpMap:
        """These values with some classes changed (``ValueError`` naming an unknown class)."""
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            known = ", ".join(self.names())
            raise ValueError(f"unknown DSCP class {', '.join(unknown)}: the classes are {known}")
        return DscpMap(**(self.values() | dict(changes)))

    def option(self) -> str:
        """The ``--dscp`` argument that gives these values (``trimmable=4,...,control=46``)."""
        return ",".join(f"{name}={value}" for name, value in self.values().items())
