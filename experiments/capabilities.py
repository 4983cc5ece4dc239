"""What a run's target can do that an experiment's comparison may rest on.

An experiment that compares two fabric configurations (``incast``: ECN marking and trimming on
against off) compares two identical fabrics on a target that can do neither; its ratio would
be run-to-run noise presented as an effect. The runner therefore finds out, before any
bring-up, what the target does (BMv2's ``mrc.p4`` trims and marks; a kernel switch never
trims, and marks ECN only where the kernel offers RED or codel, which ``hostenv.qdiscs``
probes), records it in summary.json, and hands it to the experiment's ``summarize``, which
makes only the comparisons the target supports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.targets import controller_target
from testbed.targets import differences, kernel_qdiscs_for, roce_class


@dataclass(frozen=True)
class TargetFacts:
    """What the switches of a run can do: trim, mark ECN (None: unknown, the kernel's qdiscs
    could not be probed) and by what, and what the target lacks against BMv2, one line each."""

    target: str
    trimming: bool
    ecn_marking: bool | None
    ecn_by: str | None
    lacks: tuple[str, ...] = ()
    #: What the fabric gives standard RoCE data (its lossless class or why none, and whether
    #: ECN marks it for DCQCN): said beside every RoCE figure from the target.
    roce_class: str = "not stated"


def target_facts(target: str, qdiscs: Mapping[str, bool] | None) -> TargetFacts:
    """The facts of ``target``, as its capabilities declare them (``controller.targets``),
    given the kernel's qdiscs (``probe_qdiscs``; None: not probed) where its ECN marking rests
    on them."""
    capabilities = controller_target(target).capabilities
    return TargetFacts(
        target,
        trimming=capabilities.trimming,
        ecn_marking=capabilities.ecn.marks(qdiscs),
        ecn_by=capabilities.ecn.marker(qdiscs),
        lacks=tuple(differences(target, qdiscs)),
        roce_class=roce_class(target, qdiscs),
    )


def probe_target_facts(target: str) -> TargetFacts:
    """:func:`target_facts` for this machine (the kernel's qdiscs probed where the target's
    ECN marking depends on them, as on ``linux``)."""
    return target_facts(target, kernel_qdiscs_for(target))
