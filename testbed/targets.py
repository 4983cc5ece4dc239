"""Targets the runner can bring a topology up on, what each needs from this machine, and
which one a run gets when none is named.

A target is the switch implementation behind the same topology, controller and agents:

* ``bmv2``: Mininet with one ``simple_switch_grpc`` per switch, programmed by
  ``mrc-controller`` with ``p4src/build/mrc.json`` over P4Runtime;
* ``linux``: Mininet with one network namespace per switch forwarding in the kernel,
  programmed by ``mrc-controller --target linux`` over netlink. Built only from what
  ``make setup`` installs, so it runs on a fresh machine.

Each target's check lists every missing piece with how to get it, before anything is
created, so a user learns all of it from one failed start. ``auto`` (the runner's default)
picks ``bmv2`` where its tools are present and ``linux`` otherwise, and says why in one line.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.southbound import p4_program
from hostenv.toolchain import MININET, SIMPLE_SWITCH_CLI, find_tool
from testbed.mininet.preflight import (
    bmv2_binary_problems,
    machine_problems,
    preflight_problems,
)
from testbed.mininet.switch_target import SwitchTarget
from topologies.model import Topology

#: The qdiscs that can mark ECN on a kernel switch (RED with ``ecn``, codel's ``ce_threshold``).
ECN_QDISCS = ("red", "codel", "fq_codel")
#: The target name that means "the default choice for this machine" (:func:`default_target`).
AUTO = "auto"
#: Targets the controller drives but the runner cannot start: the switches are hardware.
HARDWARE_TARGETS = {
    "tofino": (
        "there is no Tofino switch to start here: the testbed brings up software switches only; "
        "run `mrc-controller run TOPOLOGY --target tofino --config FILE` against your switches "
        "(docs/tofino.md)"
    ),
}


def hardware_target_problem(name: str) -> str | None:
    """Why the runner cannot start ``name``, a target of real switches; None for others."""
    return HARDWARE_TARGETS.get(name)


class TargetUnavailable(RuntimeError):
    """The target cannot run here; ``problems`` says what is missing and how to get it."""

    def __init__(self, target: str, problems: list[str]) -> None:
        super().__init__(f"target {target} cannot run here:\n  - " + "\n  - ".join(problems))
        self.target = target
        self.problems = problems


@dataclass(frozen=True)
class Target:
    """A target's name and the check of what it needs (empty list: all present)."""

    name: str
    description: str
    #: What it lacks to run a given topology here (machine and topology: service ports).
    problems: Callable[[Topology], list[str]]
    #: What it lacks on this machine whatever the topology (``make doctor``).
    machine_problems: Callable[[], list[str]]


@dataclass(frozen=True)
class TargetChoice:
    """The target a run uses, and the one line the runner announces it with."""

    target: Target
    reason: str

    @property
    def announcement(self) -> str:
        return f"target {self.target.name}: {self.reason}"


def bmv2_tool_problems() -> list[str]:
    """What of BMv2's own toolchain is missing, whatever the topology: the switch with
    Thrift, its CLI, the compiled program. The default choice looks at these alone."""
    problems = bmv2_binary_problems()
    if find_tool(SIMPLE_SWITCH_CLI) is None:
        problems.append(f"simple_switch_CLI not found: {SIMPLE_SWITCH_CLI.how_to_get}")
    for path in (p4_program.P4INFO_PATH, p4_program.P4BLOB_PATH):
        if not path.is_file():
            problems.append(f"{path} missing: run `make build` (needs p4c)")
    return problems


def bmv2_machine_problems() -> list[str]:
    """What the BMv2 target lacks here: root, Mininet, BMv2 with its CLI, the program."""
    problems = machine_problems(SwitchTarget.BMV2)
    if find_tool(MININET) is None:
        problems.append(f"Mininet (mn) not found: {MININET.how_to_get}")
    return _unique(problems + bmv2_tool_problems())


def bmv2_problems(topology: Topology) -> list[str]:
    """What the BMv2 target lacks for ``topology``: the machine's, and service ports in use."""
    return _unique(bmv2_machine_problems() + preflight_problems(topology, SwitchTarget.BMV2))


def linux_machine_problems() -> list[str]:
    """What the linux target lacks: Mininet's bring-up checks (root, ip, tc, ethtool, sysctl,
    mnexec, Mininet) and pyroute2, through which the controller speaks netlink."""
    problems = machine_problems(SwitchTarget.LINUX)
    if importlib.util.find_spec("pyroute2") is None:
        problems.append("pyroute2 not found (the controller's netlink southbound): `make setup`")
    return problems


def linux_problems(topology: Topology) -> list[str]:
    """What the linux target lacks for ``topology``: only the machine matters (no ports)."""
    return linux_machine_problems()


TARGETS = {
    "bmv2": Target(
        "bmv2",
        "Mininet, one simple_switch_grpc per switch, mrc.p4 pushed by the controller",
        bmv2_problems,
        bmv2_machine_problems,
    ),
    "linux": Target(
        "linux",
        "Mininet, one kernel-forwarding namespace per switch, programmed over netlink",
        linux_problems,
        linux_machine_problems,
    ),
}


def default_target(bmv2_missing: list[str] | None = None) -> TargetChoice:
    """``bmv2`` where its tools are present, ``linux`` otherwise; the reason names what
    decided (``bmv2_missing``: the BMv2 tool problems, probed when not given)."""
    missing = bmv2_tool_problems() if bmv2_missing is None else bmv2_missing
    if not missing:
        return TargetChoice(
            TARGETS["bmv2"], "BMv2's tools are present (TARGET=linux for kernel switches)"
        )
    first = missing[0].split(":")[0]
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    return TargetChoice(
        TARGETS["linux"],
        f"kernel switches, because BMv2 is not usable here ({first}{more}; `make doctor`)",
    )


def choose_target(name: str, topology: Topology) -> TargetChoice:
    """The target called ``name`` (``auto``: :func:`default_target`) if it can run
    ``topology`` here; TargetUnavailable if not, ValueError for a name that is no target."""
    if name == AUTO:
        choice = default_target()
    else:
        target = TARGETS.get(name)
        hardware = hardware_target_problem(name)
        if hardware is not None:
            raise ValueError(f"target {name!r}: {hardware}")
        if target is None:
            known = ", ".join([*TARGETS, AUTO])
            raise ValueError(f"unknown target {name!r}; targets: {known}")
        choice = TargetChoice(target, "as asked")
    problems = choice.target.problems(topology)
    if problems:
        raise TargetUnavailable(choice.target.name, problems)
    return choice


def check_target(name: str, topology: Topology) -> Target:
    """:func:`choose_target` without the announcement."""
    return choose_target(name, topology).target


def differences(target: str, qdiscs: Mapping[str, bool] | None) -> list[str]:
    """What ``target`` does not do that ``bmv2`` does, one line each (empty for ``bmv2``);
    ``qdiscs`` is what the kernel offers (``hostenv.qdiscs.probe_qdiscs``; None: not probed):
    ECN marking needs RED or codel, and is off where the kernel has neither."""
    if target != "linux":
        return []
    return [
        "no packet trimming: MRC recovers lost packets by SACK and timeout",
        "no DSCP classes or high-priority queue: MRC control, trimmed headers and RoCE CNPs "
        "queue with data (the kernel forwards RoCE and MRC alike, by address)",
        "no per-member counters: per-interface rx/tx/drop counters instead",
        ecn_difference(qdiscs),
        "no switch restart: a kernel switch has no process to kill (`restart` is refused)",
        "link state from netlink carrier events, not LLDP probes",
    ]


def ecn_difference(qdiscs: Mapping[str, bool] | None) -> str:
    """Whether kernel switches mark ECN, given the kernel's qdiscs."""
    if qdiscs is None:
        return "ECN marking unknown: the kernel's qdiscs could not be probed (needs root)"
    markers = [name for name in ECN_QDISCS if qdiscs.get(name)]
    if markers:
        # The southbound uses the first by preference (controller/southbound/linux/ecn.py),
        # under a port's tbf: a port without a rate limit builds no queue to mark.
        return f"ECN marking by the kernel's {markers[0]}, on rate-limited fabric ports only"
    return "no ECN marking: this kernel offers neither RED nor codel (hostenv/qdiscs.py)"


def _unique(problems: list[str]) -> list[str]:
    return list(dict.fromkeys(problems))
