"""The two ways Mininet runs a switch, and what differs between them in bring-up.

``bmv2``: one ``simple_switch_grpc`` per switch in the root namespace, bound to root-namespace
veth ends named ``<prefix>-<switch>-<port>`` (BMv2 needs them unique on the machine, and the
controller reaches its gRPC and Thrift ports on 127.0.0.1).

``kernel``: each switch is a network namespace of its own, ``<prefix>-<switch>``, forwarding
in the kernel; port N is the interface ``swpN`` inside it. Nothing runs in it but Mininet's
shell: the controller's netlink southbound writes routes, neighbours and qdiscs there.

A target the testbed can start (``switch_target``) runs its switches as one of these kinds.
"""

from __future__ import annotations

from enum import StrEnum


class SwitchKind(StrEnum):
    """How Mininet runs a target's switches."""

    #: A ``simple_switch_grpc`` process per switch (``bmv2_switch``).
    BMV2 = "bmv2"
    #: A namespace per switch forwarding in the kernel (``kernel_switch``).
    KERNEL = "kernel"

    @property
    def has_process(self) -> bool:
        """Whether a switch is a process of its own, which the testbed can kill and start
        again (a kernel switch is only its namespace's forwarding state)."""
        return self is SwitchKind.BMV2

    @property
    def in_own_namespace(self) -> bool:
        """Whether each switch lives in a namespace of its own (its controller is then told
        the run's prefix: switch ``s1`` is ``<prefix>-s1``)."""
        return self is SwitchKind.KERNEL
