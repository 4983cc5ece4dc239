"""Which target a run gets, whether it can run here, and what it does not do that BMv2 does.

The targets are the testbed's registry (``testbed.mininet.switch_target``): each a controller
target (``controller.targets``) with how Mininet runs its switches and what it needs from this
machine. Each target's check lists every missing piece with how to get it, before anything is
created, so a user learns all of it from one failed start. ``auto`` (the runner's default)
picks the first target in its order of preference whose tools are present (``bmv2``), else
the last (``linux``, built from what ``make setup`` installs), and says why in one line.

What a target lacks against BMv2's ``mrc.p4`` is read from its declared capabilities, one line
each; ECN marking by the kernel depends on its qdiscs, probed here where a target needs them.
:func:`roce_class` says in one sentence what the fabric makes of standard RoCE (a lossless class
or tail drops, ECN for DCQCN or none), to stand beside every RoCE figure from the target.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from controller.southbound.interface import LinkEvidence
from controller.southbound.target import EcnMarking, Feature
from controller.targets import controller_target
from hostenv.qdiscs import probe_qdiscs
from testbed.mininet.switch_target import (
    SwitchTarget,
    find_switch_target,
    hardware_reason,
    switch_target_names,
    switch_targets,
)
from topologies.model import Topology
from topologies.paths import PathMode

log = logging.getLogger(__name__)

#: The target name that means "the default choice for this machine" (:func:`default_target`).
AUTO = "auto"


class TargetUnavailable(RuntimeError):
    """The target cannot run here; ``problems`` says what is missing and how to get it."""

    def __init__(self, target: str, problems: list[str]) -> None:
        super().__init__(f"target {target} cannot run here:\n  - " + "\n  - ".join(problems))
        self.target = target
        self.problems = problems


class PathModeUnavailable(ValueError):
    """The target cannot carry the asked path mode here (the target, or this kernel, lacks
    what it needs)."""


@dataclass(frozen=True)
class TargetChoice:
    """The target a run uses, and the one line the runner announces it with."""

    target: SwitchTarget
    reason: str

    @property
    def announcement(self) -> str:
        return f"target {self.target.name}: {self.reason}"


def target_help() -> str:
    """What ``--target`` takes, for help texts."""
    preferred = _auto_order()[0].name
    names = ", ".join(switch_target_names())
    return f"the switch target: {names}, or {AUTO} ({preferred} where its tools are present)"


def _auto_order() -> list[SwitchTarget]:
    """The targets ``auto`` may take, most preferred first."""
    ranked = [target for target in switch_targets() if target.auto_rank is not None]
    return sorted(ranked, key=lambda target: target.auto_rank or 0)


def default_target(tools_missing: Mapping[str, list[str]] | None = None) -> TargetChoice:
    """The first target in ``auto``'s order whose tools are present, else the last; the reason
    names what decided. ``tools_missing``: each target's tool problems where already probed
    (``SwitchTarget.tool_problems``); the others are probed here."""
    given = tools_missing or {}

    def missing(target: SwitchTarget) -> list[str]:
        return given[target.name] if target.name in given else target.tool_problems()

    first, *others = _auto_order()
    first_missing = missing(first)
    if not first_missing:
        instead = f" (TARGET={others[0].name} for {others[0].title})" if others else ""
        return TargetChoice(first, f"{first.title}'s tools are present{instead}")
    # The last one is taken whatever it lacks: choose_target then says what that is.
    fallback = others[-1] if others else first
    chosen = next((target for target in others[:-1] if not missing(target)), fallback)
    cause = first_missing[0].split(":")[0]
    more = f" and {len(first_missing) - 1} more" if len(first_missing) > 1 else ""
    return TargetChoice(
        chosen,
        f"{chosen.title}, because {first.title} is not usable here ({cause}{more}; `make doctor`)",
    )


def choose_target(name: str, topology: Topology) -> TargetChoice:
    """The target called ``name`` (``auto``: :func:`default_target`) if it can run
    ``topology`` here; TargetUnavailable if not, ValueError for a name the testbed cannot
    start (a hardware target, or no target)."""
    if name == AUTO:
        choice = default_target()
    else:
        target = find_switch_target(name)
        if target is None:
            hardware = hardware_reason(name)
            if hardware is not None:
                raise ValueError(f"target {name!r}: {hardware}")
            known = ", ".join([*switch_target_names(), AUTO])
            raise ValueError(f"unknown target {name!r}; targets: {known}")
        choice = TargetChoice(target, "as asked")
    problems = choice.target.problems(topology)
    if problems:
        raise TargetUnavailable(choice.target.name, problems)
    return choice


def check_target(name: str, topology: Topology) -> SwitchTarget:
    """:func:`choose_target` without the announcement."""
    return choose_target(name, topology).target


def check_path_mode(target: SwitchTarget, mode: PathMode | None) -> None:
    """PathModeUnavailable, saying why, for a path mode ``target`` cannot carry here (kernel
    switches: structured EV always, SRv6 where the kernel lacks seg6local NEXT-C-SID
    routes)."""
    refusal = target.capabilities.path_mode_refusal(mode)
    if refusal is not None:
        raise PathModeUnavailable(f"{refusal} (docs/routing.md)")


def kernel_qdiscs_for(target: str) -> dict[str, bool] | None:
    """The kernel's qdiscs where ``target``'s ECN marking depends on them; None where it does
    not, or where they could not be probed (needs root)."""
    if not controller_target(target).capabilities.ecn.by_kernel:
        return None
    try:
        return probe_qdiscs()
    except OSError as error:
        log.warning("could not probe the kernel's qdiscs: %s", error)
        return None


def differences(target: str, qdiscs: Mapping[str, bool] | None) -> list[str]:
    """What ``target`` does not do that ``bmv2`` does, one line each (empty for ``bmv2``);
    ``qdiscs`` is what the kernel offers (``hostenv.qdiscs.probe_qdiscs``; None: not probed),
    for a target whose ECN marking rests on them."""
    capabilities = controller_target(target).capabilities
    lacks = capabilities.lacks
    lines = [
        f"no {feature}: {lacks[feature]}"
        for feature in (
            Feature.TRIMMING,
            Feature.DSCP_CLASSES,
            Feature.LOSSLESS_ROCE,
            Feature.MEMBER_COUNTERS,
        )
        if feature in lacks
    ]
    ecn = ecn_difference(capabilities.ecn, qdiscs)
    if ecn is not None:
        lines.append(ecn)
    if Feature.RESTART in lacks:
        lines.append(f"no {Feature.RESTART}: {lacks[Feature.RESTART]} (`restart` is refused)")
    if capabilities.link_evidence is not LinkEvidence.PROBES:
        lines.append(f"link state from {capabilities.link_source}, not LLDP probes")
    return lines


def roce_class(target: str, qdiscs: Mapping[str, bool] | None) -> str:
    """How ``target``'s switches treat standard RoCE data, the one sentence every RoCE figure
    from it carries: its lossless class, or why it has none, and whether ECN marks it for
    DCQCN; ``qdiscs`` as for :func:`differences`."""
    capabilities = controller_target(target).capabilities
    marking = ecn_difference(capabilities.ecn, qdiscs)
    if marking is None:
        marking = f"ECN marking by {capabilities.ecn.program} on fabric ports"
    dcqcn = {
        True: "DCQCN acts",
        False: "DCQCN never acts",
        None: "DCQCN may not act",
    }[capabilities.ecn.marks(qdiscs)]
    return f"{capabilities.roce_class}; {marking}, so {dcqcn}"


def ecn_difference(marking: EcnMarking, qdiscs: Mapping[str, bool] | None) -> str | None:
    """How ECN marking differs from BMv2's, given the kernel's qdiscs; None: it does not (a
    switch program marks)."""
    if marking.program is not None:
        return None
    if not marking.qdiscs:
        return "no ECN marking"
    if qdiscs is None:
        return "ECN marking unknown: the kernel's qdiscs could not be probed (needs root)"
    marker = marking.marker(qdiscs)
    if marker is not None:
        # Under a port's tbf: a port without a rate limit builds no queue to mark.
        return f"ECN marking by the kernel's {marker}, on rate-limited fabric ports only"
    return "no ECN marking: this kernel offers neither RED nor codel (hostenv/qdiscs.py)"
