"""The DSCP value of each MRC traffic class: the one type agents, switches and topologies share.

Switches classify MRC packets by DSCP alone (never by opcode), so the agents that mark packets
and the switches that queue, trim and re-mark them must agree on all six values. A topology's
``settings.dscp`` is parsed into a ``DscpMap``, programmed into the switches and handed to every
agent (``mrc-agent serve --dscp``); the defaults are ``DscpClass``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from wire.constants import DscpClass


@dataclass(frozen=True, slots=True)
class DscpMap:
    """DSCP value of each MRC traffic class; six distinct values in 0-63 (``ValueError``)."""

    trimmable: int = int(DscpClass.TRIMMABLE)
    trimmable_retx: int = int(DscpClass.TRIMMABLE_RETX)
    no_trim: int = int(DscpClass.NO_TRIM)
    trimmed: int = int(DscpClass.TRIMMED)
    trimmed_lasthop: int = int(DscpClass.TRIMMED_LASTHOP)
    control: int = int(DscpClass.CONTROL)

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
        """The six class names, as fields, topology keys and ``--dscp`` keys spell them."""
        return tuple(field.name for field in fields(cls))

    def values(self) -> dict[str, int]:
        """Each class name with its value."""
        return {name: getattr(self, name) for name in self.names()}

    def by_class(self) -> dict[DscpClass, int]:
        """Each class (named by its :class:`DscpClass` member) with its configured value."""
        return {member: getattr(self, member.name.lower()) for member in DscpClass}

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
