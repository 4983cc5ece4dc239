"""The targets a run can bring up: each the testbed side of a controller target of the same
name (``controller.targets``, whose capabilities it reads), that is how Mininet runs its
switches (a :class:`~testbed.mininet.switch_kind.SwitchKind`) and what it needs from this
machine.

* ``bmv2``: one ``simple_switch_grpc`` per switch, ``mrc.p4`` pushed by the controller;
* ``linux``: one kernel-forwarding namespace per switch, programmed over netlink. Built only
  from what ``make setup`` installs, so it runs on a fresh machine.

A hardware target (``tofino``) has no testbed side: asking for it is refused with the reason its
declaration gives. A new software target is one more :class:`SwitchTarget` registered below
(:func:`register_switch_target`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.southbound.target import Capabilities, ControllerTarget
from controller.targets import controller_target, target_names
from hostenv.toolchain import MININET, SIMPLE_SWITCH_CLI, find_tool
from testbed.mininet.preflight import bmv2_binary_problems, machine_problems, preflight_problems
from testbed.mininet.switch_kind import SwitchKind
from topologies.model import Topology


def no_problems() -> list[str]:
    """The check of a target that needs nothing more."""
    return []


@dataclass(frozen=True)
class SwitchTarget:
    """A target the testbed can start, and what it needs here (empty lists: all present)."""

    name: str
    kind: SwitchKind
    #: What a run on it brings up, one line (``make doctor``).
    description: str
    #: What its switches are called in one line of ``auto``'s: ``BMv2``, ``kernel switches``.
    title: str
    #: Its place in ``auto``'s preference, lowest first; None: ``auto`` never takes it.
    auto_rank: int | None = None
    #: Its own tools this machine lacks (the switch, its CLI), one line each with how to get
    #: them; :meth:`tool_problems` adds the controller side's.
    own_tool_problems: Callable[[], list[str]] = no_problems
    #: Anything else a bring-up needs here, beyond its kind's and the tools.
    other_problems: Callable[[], list[str]] = no_problems

    @property
    def controller(self) -> ControllerTarget[Any]:
        return controller_target(self.name)

    @property
    def capabilities(self) -> Capabilities:
        return self.controller.capabilities

    def tool_problems(self) -> list[str]:
        """What of the target's own toolchain is missing, whatever the topology and the
        machine's Mininet: its switch's and the controller side's (a compiled program, a
        library). ``auto`` looks at these alone."""
        return _unique(self.own_tool_problems() + self.controller.machine_problems())

    def machine_problems(self) -> list[str]:
        """What it lacks on this machine whatever the topology (``make doctor``)."""
        return _unique(machine_problems(self.kind) + self.other_problems() + self.tool_problems())

    def problems(self, topology: Topology) -> list[str]:
        """What it lacks to run ``topology`` here: the machine's, and the topology's (service
        ports in use)."""
        return _unique(self.machine_problems() + preflight_problems(topology, self.kind))


_TARGETS: dict[str, SwitchTarget] = {}


def register_switch_target(target: SwitchTarget) -> SwitchTarget:
    """Let the testbed start ``target``: a software target of ``controller.targets`` (a
    hardware one, or a name the controller does not know, is refused), once."""
    hardware = hardware_reason(target.name)
    if hardware is not None:
        raise ValueError(f"target {target.name!r} is hardware: {hardware}")
    if target.name not in target_names():
        raise ValueError(f"target {target.name!r}: register its controller side first")
    if target.name in _TARGETS:
        raise ValueError(f"switch target {target.name!r} is registered already")
    if controller_target(target.name).capabilities.restart and not target.kind.has_process:
        raise ValueError(
            f"target {target.name!r} declares switch restart, but a {target.kind} switch has no "
            "process to restart: declare Feature.RESTART among what it lacks"
        )
    _TARGETS[target.name] = target
    return target


def unregister_switch_target(name: str) -> None:
    """Remove a target (a test's dummy one, say); the built-in ones stay."""
    if name not in (BMV2.name, LINUX.name):
        _TARGETS.pop(name, None)


def switch_targets() -> tuple[SwitchTarget, ...]:
    """Every target the testbed can start, in registration order."""
    return tuple(_TARGETS.values())


def switch_target_names() -> tuple[str, ...]:
    return tuple(_TARGETS)


def find_switch_target(name: str) -> SwitchTarget | None:
    """The target called ``name`` if the testbed can start it."""
    return _TARGETS.get(name)


def hardware_reason(name: str) -> str | None:
    """Why the testbed cannot start ``name``, a controller target of hardware switches; None
    for any other name."""
    return controller_target(name).capabilities.hardware if name in target_names() else None


def switch_target(name: str) -> SwitchTarget:
    """The target called ``name``; ValueError saying why the testbed cannot start it (its
    switches are hardware) or naming the ones it can."""
    target = _TARGETS.get(name)
    if target is not None:
        return target
    hardware = hardware_reason(name)
    if hardware is not None:
        raise ValueError(f"switch target {name!r}: {hardware}")
    raise ValueError(f"unknown switch target {name!r}; targets: {', '.join(_TARGETS)}")


def bmv2_tool_problems() -> list[str]:
    """BMv2's own: the switch with Thrift, and its CLI (queue settings)."""
    problems = bmv2_binary_problems()
    if find_tool(SIMPLE_SWITCH_CLI) is None:
        problems.append(f"simple_switch_CLI not found: {SIMPLE_SWITCH_CLI.how_to_get}")
    return problems


def mininet_command_problems() -> list[str]:
    if find_tool(MININET) is None:
        return [f"Mininet (mn) not found: {MININET.how_to_get}"]
    return []


def _unique(problems: list[str]) -> list[str]:
    return list(dict.fromkeys(problems))


BMV2 = register_switch_target(
    SwitchTarget(
        name="bmv2",
        kind=SwitchKind.BMV2,
        description="Mininet, one simple_switch_grpc per switch, mrc.p4 pushed by the controller",
        title="BMv2",
        auto_rank=0,
        own_tool_problems=bmv2_tool_problems,
        other_problems=mininet_command_problems,
    )
)
LINUX = register_switch_target(
    SwitchTarget(
        name="linux",
        kind=SwitchKind.KERNEL,
        description="Mininet, one kernel-forwarding namespace per switch, programmed over netlink",
        title="kernel switches",
        auto_rank=1,
    )
)
