"""The real controller programming a network of kernel switches, behind the same two calls the
BMv2 tests make on their stand-in programmer (``fabric_program.FabricProgrammer``).

There is no stand-in for the linux target: the kernel's forwarding state is written by
``mrc-controller run --target linux`` itself, and it finds link cuts on its own (netlink
carrier events). :meth:`ControllerFabric.program` therefore only waits until the controller
holds the state for the given links being down, which is what the BMv2 stand-in's ``program``
establishes by writing.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from testbed.controller_run import ControllerRun
from testbed.processes import ProcessFailed
from topologies import LinkId

#: How long the controller gets to see a change and rewrite the routes it concerns.
SETTLE_TIMEOUT_S = 30.0


class ControllerFabric:
    """``mrc-controller run --target linux`` on a running network, stopped by :meth:`close`."""

    def __init__(self, network: Any, topology_ref: str) -> None:
        self.network = network
        self.controller = ControllerRun(
            topology_ref, network.run_dir, network.prefix, discovery=True, target="linux"
        )
        try:
            self.controller.wait_in_service([s.name for s in network.topology.switches])
        except ProcessFailed as failure:
            self.close()
            raise AssertionError(f"{failure}\nlast events:\n{self._event_tail()}") from None
        except BaseException:
            self.close()
            raise

    def program(self, down: Collection[LinkId] = frozenset()) -> None:
        """Wait until the controller sees exactly ``down`` down (of the links it tracks) and
        has put every switch in service for it; AssertionError after the timeout."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            status = self.controller.status()
            tracked = {entry["link"] for entry in status["links"]}
            expected = {str(link) for link in down} & tracked
            seen = set(status["down_links"])
            if seen == expected and self._all_in_service(status):
                return
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"the controller reports {sorted(seen)} down, expected {sorted(expected)} "
                    f"(events: {self.controller.event_log})"
                )
            time.sleep(0.1)

    def status(self) -> dict[str, Any]:
        """The controller's status snapshot."""
        return self.controller.status()

    def close(self) -> None:
        self.controller.stop()

    def _event_tail(self, events: int = 8) -> str:
        return "\n".join(str(event) for event in self.controller.events()[-events:])

    @staticmethod
    def _all_in_service(status: dict[str, Any]) -> bool:
        """Every switch in service with its last programming successful (the pings that
        follow retry for a while, which covers a rewrite still under way)."""
        return all(
            switch["in_service"] and (switch["last_program"] or {}).get("ok", False)
            for switch in status["switches"].values()
        )
