"""What a run needs from the machine, per switch kind, checked before anything is created.

Every problem is listed with how to fix it, so that one failed start tells a user all of it.
Nothing here imports Mininet: a machine without it gets a message saying so, not an
ImportError.
"""

from __future__ import annotations

import importlib.util
import shutil

from hostenv.toolchain import SIMPLE_SWITCH_GRPC, bmv2_has_thrift, find_tool, is_root
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.system import port_in_use
from topologies.model import Topology

#: Commands every bring-up runs besides the switches' own: namespaces and veths (ip), offloads
#: (ethtool), per-interface settings (sysctl), Mininet's namespace helper (mnexec).
COMMON_COMMANDS = ("ip", "ethtool", "sysctl", "mnexec")
#: What a kind needs on top: queue limits on kernel switches are ``tc`` qdiscs.
KIND_COMMANDS = {SwitchKind.BMV2: (), SwitchKind.KERNEL: ("tc",)}


def preflight_problems(topology: Topology, kind: SwitchKind = SwitchKind.BMV2) -> list[str]:
    """What prevents ``topology`` from coming up with ``kind`` switches here (empty when
    nothing does)."""
    problems = machine_problems(kind)
    if kind is SwitchKind.BMV2:
        problems += _service_port_problems(topology)
    return problems


def machine_problems(kind: SwitchKind) -> list[str]:
    """What this machine lacks for ``kind`` switches, whatever the topology."""
    problems = []
    if not is_root():
        problems.append("needs root (network namespaces, veths, switch ports on raw interfaces)")
    if importlib.util.find_spec("mininet") is None:
        problems.append(
            "Mininet's Python package not found: apt-get install mininet (`make setup`)"
        )
    for command in (*COMMON_COMMANDS, *KIND_COMMANDS[kind]):
        if shutil.which(command) is None:
            problems.append(f"command {command!r} not found (`make setup` installs it)")
    if kind is SwitchKind.BMV2:
        problems += bmv2_binary_problems()
    return problems


def bmv2_binary_problems() -> list[str]:
    """``simple_switch_grpc`` missing, or built without Thrift (queue settings need it)."""
    binary = find_tool(SIMPLE_SWITCH_GRPC)
    if binary is None:
        return [f"simple_switch_grpc not found: {SIMPLE_SWITCH_GRPC.how_to_get}"]
    if not bmv2_has_thrift(binary):
        return [f"{binary} has no Thrift server (queue settings need it): rebuild it"]
    return []


def _service_port_problems(topology: Topology) -> list[str]:
    """Each BMv2's gRPC and Thrift ports must be free."""
    problems = []
    for switch in topology.switches:
        for what, port in (("gRPC", switch.grpc_port), ("Thrift", switch.thrift_port)):
            if port_in_use(port):
                problems.append(
                    f"switch {switch.name}: {what} port {port} is in use (another run still up? "
                    "`python -m testbed.mininet clean` removes dead runs)"
                )
    return problems
