"""What a target declares: its southbound, the check of a configuration, and what its switches
can do.

A target is declared once, in its own southbound package (``bmv2``, ``linux/target.py``,
``tofino/target.py``), as a :class:`ControllerTarget`, and registered in
:mod:`controller.targets`; the controller, the testbed and the experiments read every fact about
it from there. The declaration is generic over the configuration it reads (``Settings``): each
target types what it reads as a protocol of its own, since the configuration
(``controller.app.config``) imports the registry to check target names and so cannot be
imported here.

:class:`Capabilities` are measured against BMv2 running ``mrc.p4``, which does all of it: the
testbed's reference, against which another target's differences are listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from controller.southbound.interface import LinkEvidence, Southbound
from topologies.model import Topology
from topologies.paths import PathMode

#: The controller's configuration, as a target reads it (``ControllerConfig`` at run time).
Settings = TypeVar("Settings")


class TargetSettingsError(ValueError):
    """The topology or the configuration cannot work with the target; the message says why
    (the controller reports it as a configuration error before touching any switch)."""


class Feature(StrEnum):
    """What BMv2's ``mrc.p4`` does that another target may lack; the value names it in a line
    such as ``no packet trimming: ...``."""

    TRIMMING = "packet trimming"
    DSCP_CLASSES = "DSCP classes or high-priority queue"
    #: A queue of its own for standard RoCE data that congestion never drops it from.
    LOSSLESS_ROCE = "lossless RoCE class"
    MEMBER_COUNTERS = "per-member counters"
    #: Killing a switch and starting it again, empty (a switch process to kill).
    RESTART = "switch restart"


@dataclass(frozen=True)
class EcnMarking:
    """Who marks ECN on a target's switches: its program (``program``), or else the kernel
    with the first of ``qdiscs`` it offers (kernels differ, so it is probed), or nobody."""

    #: The switch program that marks, e.g. ``mrc.p4``; None: no program marks.
    program: str | None = None
    #: The kernel qdiscs that can mark, most faithful first (without a program).
    qdiscs: tuple[str, ...] = ()

    @property
    def by_kernel(self) -> bool:
        """Whether marking depends on the kernel's qdiscs (then worth probing them)."""
        return self.program is None and bool(self.qdiscs)

    def marker(self, offered: Mapping[str, bool] | None) -> str | None:
        """What marks, given the qdiscs the kernel offers (``hostenv.qdiscs.probe_qdiscs``;
        None: not probed); None when nothing does, or it is unknown."""
        if self.program is not None:
            return self.program
        if offered is None:
            return None
        return next((name for name in self.qdiscs if offered.get(name)), None)

    def marks(self, offered: Mapping[str, bool] | None) -> bool | None:
        """Whether packets are marked; None where it rests on qdiscs that were not probed."""
        if self.program is not None:
            return True
        if not self.qdiscs:
            return False
        if offered is None:
            return None
        return self.marker(offered) is not None


#: What BMv2's ``mrc.p4`` makes of standard RoCE data: its own deep queue, ECN-marked, with
#: nothing that pauses a sender as PFC would. Every RoCE figure from BMv2 carries these words.
BMV2_LOSSLESS_CLASS = "lossless class: no congestion drops; pause frames (PFC) not modelled"


def carries_every_path_mode(mode: PathMode | None) -> str | None:
    """The path-mode refusal of a target that carries every mode: never refused."""
    return None


@dataclass(frozen=True)
class Capabilities:
    """What a target's switches do; by default, all that BMv2's ``mrc.p4`` does."""

    #: Each feature the target lacks, with why or what happens instead (one clause).
    lacks: Mapping[Feature, str] = field(default_factory=dict)
    ecn: EcnMarking = EcnMarking(program="mrc.p4")
    #: How the controller learns link state, and from what (a phrase for a line).
    link_evidence: LinkEvidence = LinkEvidence.PROBES
    link_source: str = "LLDP probes"
    #: Why the target cannot carry a path mode (None: it can, and None and ``ecmp`` always
    #: can); may probe this machine, as the linux target probes its kernel for SRv6.
    path_mode_refusal: Callable[[PathMode | None], str | None] = carries_every_path_mode
    #: Why the testbed cannot start the target (its switches are hardware); None: software
    #: switches the testbed brings up.
    hardware: str | None = None
    #: What the target's lossless RoCE class is (a clause beginning "lossless class"); a
    #: target without one lists :attr:`Feature.LOSSLESS_ROCE` among what it lacks instead.
    lossless_class: str = BMV2_LOSSLESS_CLASS
    #: Whether the switches arbitrate between controllers (P4Runtime election ids); without,
    #: two controllers agree through ``--primary-lock`` (``controller.southbound.linux.primacy``).
    arbitration: bool = True

    def has(self, feature: Feature) -> bool:
        return feature not in self.lacks

    @property
    def lossless_roce(self) -> bool:
        return self.has(Feature.LOSSLESS_ROCE)

    @property
    def roce_class(self) -> str:
        """How the target's switches queue standard RoCE data, one clause: its lossless class,
        or why it has none."""
        if self.lossless_roce:
            return self.lossless_class
        return f"no {Feature.LOSSLESS_ROCE}: {self.lacks[Feature.LOSSLESS_ROCE]}"

    @property
    def trimming(self) -> bool:
        return self.has(Feature.TRIMMING)

    @property
    def dscp_classes(self) -> bool:
        return self.has(Feature.DSCP_CLASSES)

    @property
    def member_counters(self) -> bool:
        return self.has(Feature.MEMBER_COUNTERS)

    @property
    def restart(self) -> bool:
        return self.has(Feature.RESTART)


def no_problems() -> list[str]:
    """The machine check of a target that needs nothing on this machine."""
    return []


@dataclass(frozen=True)
class ControllerTarget(Generic[Settings]):
    """A kind of switch the controller drives: ``mrc-controller run --target NAME``."""

    name: str
    #: One line for choice lists and docs.
    summary: str
    capabilities: Capabilities
    #: Raise :class:`TargetSettingsError` when the topology or the configuration cannot work
    #: with this target, before any switch is touched.
    check: Callable[[Topology, Settings], None]
    #: The southbound for every switch of the topology (TargetSettingsError for a setting it
    #: cannot use).
    build: Callable[[Topology, Settings], Southbound]
    #: What the controller lacks on this machine to drive the target (a compiled program, a
    #: library), one line each with how to get it.
    machine_problems: Callable[[], list[str]] = no_problems
