"""Targets the runner can bring a topology up on, and what each needs from this machine.

A target is the switch implementation behind the same topology, controller and agents. Today
there is one, ``bmv2``: Mininet with one ``simple_switch_grpc`` per switch, programmed by
``mrc-controller`` with ``p4src/build/mrc.json``. Its check lists every missing piece with how
to get it, before anything is created, so a user learns all of it from one failed start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.southbound import p4_program
from tools.toolchain import MININET, SIMPLE_SWITCH_CLI, find_tool
from topologies.model import Topology


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
    problems: Callable[[Topology], list[str]]


def bmv2_problems(topology: Topology) -> list[str]:
    """What the BMv2 target lacks: Mininet's bring-up checks, the CLI, the compiled program."""
    from topologies.mininet.network import preflight_problems  # imports Mininet

    problems = list(preflight_problems(topology))
    if find_tool(MININET) is None:
        problems.append(f"Mininet (mn) not found: {MININET.how_to_get}")
    if find_tool(SIMPLE_SWITCH_CLI) is None:
        problems.append(f"simple_switch_CLI not found: {SIMPLE_SWITCH_CLI.how_to_get}")
    for path in (p4_program.P4INFO_PATH, p4_program.P4BLOB_PATH):
        if not path.is_file():
            problems.append(f"{path} missing: run `make build` (needs p4c)")
    return problems


TARGETS = {
    "bmv2": Target(
        "bmv2",
        "Mininet, one simple_switch_grpc per switch, mrc.p4 pushed by the controller",
        bmv2_problems,
    ),
}


def check_target(name: str, topology: Topology) -> Target:
    """The target called ``name`` if it can run ``topology`` here; TargetUnavailable if not,
    ValueError for a name that is no target."""
    target = TARGETS.get(name)
    if target is None:
        raise ValueError(f"unknown target {name!r}; targets: {', '.join(TARGETS)}")
    problems = target.problems(topology)
    if problems:
        raise TargetUnavailable(name, problems)
    return target
