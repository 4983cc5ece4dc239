"""The two kinds of switch a run can bring up, and what differs between them in Mininet.

``bmv2``: one ``simple_switch_grpc`` per switch in the root namespace, bound to root-namespace
veth ends named ``<prefix>-<switch>-<port>`` (BMv2 needs them unique on the machine, and the
controller reaches its gRPC and Thrift ports on 127.0.0.1).

``linux``: each switch is a network namespace of its own, ``<prefix>-<switch>``, forwarding
in the kernel; port N is the interface ``swpN`` inside it. Nothing runs in it but Mininet's
shell: the controller's netlink southbound writes routes, neighbours and qdiscs there.
"""

from __future__ import annotations

from enum import StrEnum

#: The controller's target for hardware Tofino switches, which Mininet cannot start.
TOFINO = "tofino"


class SwitchTarget(StrEnum):
    """Which switch implementation a run brings up."""

    BMV2 = "bmv2"
    LINUX = "linux"

    @classmethod
    def parse(cls, name: str | SwitchTarget) -> SwitchTarget:
        """The target called ``name``; ValueError naming the known ones otherwise."""
        try:
            return cls(name)
        except ValueError:
            known = ", ".join(target.value for target in cls)
            if name == TOFINO:
                raise ValueError(
                    f"switch target {name!r}: there is no Tofino switch to start here "
                    f"(Mininet targets: {known}; docs/tofino.md)"
                ) from None
            raise ValueError(f"unknown switch target {name!r}; targets: {known}") from None
