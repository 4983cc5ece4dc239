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

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from hostenv.qdiscs import probe_qdiscs
from testbed.targets import ECN_QDISCS, differences

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TargetFacts:
    """What the switches of a run can do: trim, mark ECN (None: unknown, the kernel's qdiscs
    could not be probed) and by what, and what the target lacks against BMv2, one line each."""

    target: str
    trimming: bool
    ecn_marking: bool | None
    ecn_by: str | None
    lacks: tuple[str, ...] = ()


def target_facts(target: str, qdiscs: Mapping[str, bool] | None) -> TargetFacts:
    """The facts of ``target`` given the kernel's qdiscs (``probe_qdiscs``; None: not
    probed). Only ``linux`` differs from BMv2."""
    if target != "linux":
        return TargetFacts(target, trimming=True, ecn_marking=True, ecn_by="mrc.p4")
    lacks = tuple(differences(target, qdiscs))
    if qdiscs is None:
        return TargetFacts(target, trimming=False, ecn_marking=None, ecn_by=None, lacks=lacks)
    markers = [name for name in ECN_QDISCS if qdiscs.get(name)]
    return TargetFacts(
        target,
        trimming=False,
        ecn_marking=bool(markers),
        ecn_by=markers[0] if markers else None,
        lacks=lacks,
    )


def probe_target_facts(target: str) -> TargetFacts:
    """:func:`target_facts` for this machine (on ``linux``, the kernel's qdiscs probed)."""
    if target != "linux":
        return target_facts(target, None)
    try:
        qdiscs: dict[str, bool] | None = probe_qdiscs()
    except OSError as error:
        log.warning("could not probe the kernel's qdiscs: %s", error)
        qdiscs = None
    return target_facts(target, qdiscs)
