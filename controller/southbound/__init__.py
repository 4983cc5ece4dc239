"""The controller's southbound: how intents reach switches, and what switches report back.

``interface`` defines the target-neutral contract (:class:`Southbound`, :class:`SouthboundEvents`);
``p4runtime`` implements it for P4Runtime targets (BMv2's simple_switch_grpc) with finsy, using
``mapping`` (intent -> mrc.p4 entities), ``plan`` (diff and safe write order), ``writer``
(batched execution), ``finsy_codec`` (records <-> finsy entities) and ``queues`` (BMv2's
Thrift-only queue settings); ``tofino`` is that P4Runtime southbound for Tofino switches (the
TNA program's pipeline packed for Stratum or the SDE, ports renumbered by ``device_ports``, no
Thrift); ``linux`` implements it for Linux-kernel switches (one network namespace each) over
netlink, with link state from carrier instead of probes.

Each target is declared once, beside its implementation (``bmv2``, ``linux.target``,
``tofino.target``), as a ``target.ControllerTarget``: its southbound, the check of a
configuration, and its capabilities; ``controller.targets`` registers them.
"""

from controller.southbound.interface import (
    EntityFailure,
    MemberCounters,
    PortCounters,
    ProgramResult,
    Southbound,
    SouthboundError,
    SouthboundEvents,
    SwitchCounters,
    SwitchRole,
)

__all__ = [
    "EntityFailure",
    "MemberCounters",
    "PortCounters",
    "ProgramResult",
    "Southbound",
    "SouthboundError",
    "SouthboundEvents",
    "SwitchCounters",
    "SwitchRole",
]
