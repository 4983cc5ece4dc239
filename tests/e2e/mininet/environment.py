"""Where the Mininet tests can run, on which switch targets, and the small topology the
teardown tests use.

Every test that brings a network up runs once per target (``bmv2``, ``linux``) and skips, with
one line, on a target whose tools are missing here.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from hostenv.toolchain import SIMPLE_SWITCH_CLI, SIMPLE_SWITCH_GRPC, find_tool, is_root
from testbed.mininet.preflight import machine_problems
from testbed.mininet.switch_target import switch_target, switch_target_names

REPO = Path(__file__).resolve().parents[3]
P4_BUILD = REPO / "p4src" / "build"
#: Every switch target, in the order the tests run them.
TARGETS = switch_target_names()

#: Two leaves, one spine, one host per leaf, on service ports of its own so that it never
#: collides with the session's leaf-spine network (default ports 50051.., 9090..).
TINY_TOPOLOGY = textwrap.dedent(
    """\
    name: tiny
    switches:
      - {name: l1, role: leaf, device_id: 1, grpc_port: 50151, thrift_port: 9190}
      - {name: l2, role: leaf, device_id: 2, grpc_port: 50152, thrift_port: 9191}
      - {name: s1, role: spine, device_id: 3, grpc_port: 50153, thrift_port: 9192}
    hosts:
      - name: h1
        nics:
          - {switch: l1, port: 1}
      - name: h2
        nics:
          - {switch: l2, port: 1}
    links:
      - {a: "l1:2", b: "s1:1"}
      - {a: "l2:2", b: "s1:2"}
    """
)


def bring_up_skip_reason(target: str = "bmv2") -> str | None:
    """Why a network cannot be brought up on ``target`` here, or None."""
    if not is_root():
        return "needs root (network namespaces, veths, switch ports on raw interfaces)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not installed (`make setup` installs Debian's mininet)"
    if target == "bmv2":
        if find_tool(SIMPLE_SWITCH_GRPC) is None:
            return "simple_switch_grpc not found (see `make doctor`)"
        return None
    problems = machine_problems(switch_target(target).kind)
    return f"{target}: {problems[0]}" if problems else None


def forwarding_skip_reason(target: str = "bmv2") -> str | None:
    """Why the programmed-fabric tests cannot run on ``target`` here, or None: on bmv2 the
    program and the Thrift CLI. On linux nothing beyond bring-up and ping: the kernel switches
    are programmed by this repository's own controller, so a controller that cannot start is
    a failure of the tests that start it, never a skip."""
    reason = bring_up_skip_reason(target)
    if reason:
        return reason
    if shutil.which("ping") is None:
        return "ping not found (apt-get install iputils-ping)"
    if target == "linux":
        return None
    if not (P4_BUILD / "mrc.json").exists():
        return "p4src/build/mrc.json missing (run `make build`)"
    if find_tool(SIMPLE_SWITCH_CLI) is None:
        return "simple_switch_CLI not found (queue settings need it)"
    return None
