"""What the live page's buttons do, through the code the testbed CLI runs.

``TestbedActions`` calls the same ``Testbed`` methods as the CLI's ``fail``, ``restore``,
``restart`` and ``mrc`` (``testbed.cli``), so a button and a typed command cannot differ.
The page server calls them from worker threads, never from its event loop: they block on
Mininet, on BMv2 starting, or for a whole transfer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from testbed.agents import TransferSpec
from testbed.live.paths import Bmv2NextHops, CarrierNextHops, KernelNextHops, NextHops
from testbed.session import Testbed
from topologies.paths import PathMode


class Actions(Protocol):
    """The operations the page offers; ``can_restart`` is False where the target has none."""

    can_restart: bool

    def fail(self, a: str, b: str) -> str: ...

    def restore(self, a: str, b: str) -> str: ...

    def restart(self, switch: str) -> str: ...

    def transfer(
        self, spec: TransferSpec, on_progress: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]: ...

    def cut_links(self) -> frozenset[str]: ...


class TestbedActions:
    """The page's operations on a running ``Testbed``."""

    __test__ = False

    def __init__(self, testbed: Testbed) -> None:
        self.testbed = testbed
        #: ``restart`` kills a switch process: kernel switches have none.
        self.can_restart = testbed.target != "linux"

    def fail(self, a: str, b: str) -> str:
        return f"cut {self.testbed.fail(a, b)}"

    def restore(self, a: str, b: str) -> str:
        return f"restored {self.testbed.restore(a, b)}"

    def restart(self, switch: str) -> str:
        mark = self.testbed.event_count()
        pid = self.testbed.restart(switch)
        self.testbed.wait_in_service([switch], after=mark)
        return f"restarted {switch} (pid {pid}); reprogrammed by the controller"

    def transfer(
        self, spec: TransferSpec, on_progress: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        return self.testbed.transfer(spec, on_progress)

    def cut_links(self) -> frozenset[str]:
        return frozenset(str(link) for link in self.testbed.network.cut_links)


def next_hops_of(testbed: Testbed) -> NextHops:
    """How the switches of ``testbed``'s target say where a packet goes (``paths``)."""
    if testbed.path_mode is PathMode.SRV6:
        return CarrierNextHops(testbed.topology)
    if testbed.target == "linux":
        return KernelNextHops(testbed.prefix)
    return Bmv2NextHops({s.name: s.thrift_port for s in testbed.topology.switches})
