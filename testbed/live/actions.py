"""What the live page's buttons do, through the code the testbed CLI runs.

``TestbedActions`` calls the same ``Testbed`` methods as the CLI's ``fail``, ``restore``,
``restart``, ``mrc`` and ``controller restart`` (``testbed.cli``), so a button and a typed
command cannot differ.
``ActionRequests`` checks what a page asks for and runs it on worker threads, never on the
page server's event loop: the operations block on Mininet, on BMv2 starting, or for a whole
transfer (a transfer runs in the background; the page follows it in the transfer's record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from testbed.agents import TransferSpec
from testbed.live.paths import Bmv2NextHops, CarrierNextHops, KernelNextHops, NextHops
from testbed.live.state import LiveState, PageTransfer, describe_error
from testbed.mininet.switch_kind import SwitchKind
from testbed.session import Testbed
from topologies.model import Topology
from topologies.paths import PathMode

#: Largest transfer the page may start.
MAX_TRANSFER_BYTES = 1 << 40
MAX_TRANSFER_S = 3600.0
#: Worker threads for the operations (a running transfer holds one for its whole length).
ACTION_THREADS = 4


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

    def controllers(self) -> dict[str, str]:
        """Each of the run's controllers (``primary``, ``backup``) and what it is doing now:
        ``primary``, ``backup``, ``connecting`` or ``dead``."""
        ...

    def restart_controller(self, name: str) -> str: ...


class TestbedActions:
    """The page's operations on a running ``Testbed``."""

    __test__ = False

    def __init__(self, testbed: Testbed) -> None:
        self.testbed = testbed
        #: ``restart`` kills a switch process: only a target whose switches restart has one
        #: (kernel switches do not).
        self.can_restart = testbed.capabilities.restart

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

    def controllers(self) -> dict[str, str]:
        controllers = self.testbed.controllers
        if controllers is None:
            return {}
        return {
            name: state.stance(controllers.switches) for name, state in controllers.states().items()
        }

    def restart_controller(self, name: str) -> str:
        role = self.testbed.restart_controller(name)
        return f"restarted the {name} controller: {role} on every switch"


def next_hops_of(testbed: Testbed) -> NextHops:
    """How the switches of ``testbed``'s target say where a packet goes (``paths``): by their
    kind (a BMv2 over Thrift, a kernel switch by its routes)."""
    if testbed.path_mode is PathMode.SRV6:
        return CarrierNextHops(testbed.topology)
    if testbed.network.kind is SwitchKind.KERNEL:
        return KernelNextHops(testbed.prefix)
    return Bmv2NextHops({s.name: s.thrift_port for s in testbed.topology.switches})


class ActionRequests:
    """The operations a page asks for (``fail``, ``restore``, ``restart``, ``transfer``):
    checked, then done on worker threads of their own."""

    def __init__(self, topology: Topology, actions: Actions, state: LiveState) -> None:
        """Do the requests on ``topology`` through ``actions``; ``state`` records the cut
        links after each and the transfers the page started."""
        self.topology = topology
        self.actions = actions
        self.state = state
        self._pool = ThreadPoolExecutor(ACTION_THREADS, thread_name_prefix="live-action")

    def prepare(self, op: str, body: dict[str, Any]) -> Callable[[], str]:
        """The blocking call that does ``op``; ValueError for a request we do not take.

        Called on the page server's event loop (a transfer reports its progress there)."""
        actions = self.actions
        if op in ("fail", "restore"):
            a, b = _text(body, "a"), _text(body, "b")
            for end in (a, b):
                self._check_node(end.split(":", 1)[0])
            return (lambda: actions.fail(a, b)) if op == "fail" else (lambda: actions.restore(a, b))
        if op == "restart":
            switch = _text(body, "switch")
            if not actions.can_restart:
                raise ValueError("restart: this target has no switch process to restart")
            if switch not in {s.name for s in self.topology.switches}:
                raise ValueError(f"restart: no switch {switch!r}")
            return lambda: actions.restart(switch)
        if op == "transfer":
            return self._transfer(body)
        if op == "controller_restart":
            name = _text(body, "controller")
            if name not in self.actions.controllers():
                raise ValueError(f"controller_restart: this run has no {name!r} controller")
            return lambda: actions.restart_controller(name)
        raise ValueError(
            f"unknown operation {op!r} (fail, restore, restart, transfer, controller_restart)"
        )

    async def perform(self, call: Callable[[], str]) -> str:
        """Run a prepared ``call`` on a worker thread; its message, or its own exception."""
        message = await asyncio.get_running_loop().run_in_executor(self._pool, call)
        self.state.set_cut(self.actions.cut_links())
        return message

    def close(self) -> None:
        """Start no more operations; those running are left to end on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _check_node(self, name: str) -> None:
        known = {s.name for s in self.topology.switches} | {h.name for h in self.topology.hosts}
        if name not in known:
            raise ValueError(f"no node {name!r} in {self.topology.name}")

    def _transfer(self, body: dict[str, Any]) -> Callable[[], str]:
        source, destination = _text(body, "source"), _text(body, "destination")
        hosts = {h.name for h in self.topology.hosts}
        if source not in hosts or destination not in hosts or source == destination:
            raise ValueError("transfer: choose two different hosts")
        total = _number(body, "bytes", 1, MAX_TRANSFER_BYTES)
        duration = _number(body, "duration", 0.1, MAX_TRANSFER_S)
        evs = _number(body, "evs", 1, 1 << 16)
        if total is None and duration is None:
            duration = 10.0
        spec = TransferSpec(
            source,
            destination,
            total_bytes=None if total is None else int(total),
            duration_s=None if total is not None else duration,
            evs=None if evs is None else int(evs),
        )
        record = self.state.start_transfer(source, destination)
        actions = self.actions
        loop = asyncio.get_running_loop()

        def on_progress(sample: dict[str, Any]) -> None:
            def apply() -> None:
                record.goodput_bps = sample.get("goodput_bps")
                record.bytes_sent = int(sample.get("total_bytes") or 0)

            loop.call_soon_threadsafe(apply)

        def run() -> None:
            try:
                result = actions.transfer(spec, on_progress)
            except Exception as error:
                failure = describe_error(error)
                loop.call_soon_threadsafe(_finish, record, "failed", failure, None)
                return
            loop.call_soon_threadsafe(_finish, record, "done", None, _summary(result))

        self._pool.submit(run)
        return lambda: f"transfer {record.id} started: {source} -> {destination}"


def _finish(
    record: PageTransfer, state: str, error: str | None, summary: dict[str, Any] | None
) -> None:
    record.state = state
    record.error = error
    record.summary = summary


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("bytes", "seconds", "goodput_bps", "retransmits_total")
    return {key: result[key] for key in keys if key in result}


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value or len(value) > 64:
        raise ValueError(f"{key!r} must be a name")
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{key!r} must be a number from {low:g} to {high:g}")
    return float(value)
