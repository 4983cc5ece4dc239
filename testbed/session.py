"""A whole testbed run as one object: network, controller, agents; always torn down in full.

    with Testbed.open("leaf-spine") as testbed:
        testbed.fail("l1", "s1")
        result = testbed.transfer(TransferSpec("h1", "h3", total_bytes=1 << 20))

Bring-up order: the network (switches start empty), the controller (pushes the pipeline and
the intent; the run waits until every switch is in service), then the agents. Teardown runs
in the reverse order on every exit (exception, Ctrl-C, SIGTERM/SIGHUP through
``running_network``'s signal handling) and ends with the network's prefix sweep, which also
catches any agent or controller that refused to stop.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collective.job import JobHooks, JobSpec
from collective.report import JobResult
from controller.southbound.target import Feature
from hostenv.netns import terminate_on_signals
from testbed.agents import HostAgents, ProgressCallback, TransferFailed, TransferSpec
from testbed.collective_run import run_collective
from testbed.controller_run import ControllerRun
from testbed.controllers import Controllers
from testbed.jobs import JobBoard
from testbed.targets import AUTO, check_path_mode, choose_target, differences, kernel_qdiscs_for
from topologies import load_topology
from topologies.model import LinkId, Topology
from topologies.paths import PathMode

log = logging.getLogger(__name__)


class Testbed:
    """A running network with its controller and agents (see :meth:`open`)."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        topology_ref: str,
        target: str = AUTO,
        discovery: bool = True,
        routing: str | None = None,
        path_mode: str | None = None,
        backup: bool = False,
    ) -> None:
        """Check the target and plan the run; nothing starts until :meth:`start`.

        ``target`` is a target the testbed can start (``bmv2``, ``linux``) or ``auto`` (BMv2
        where its tools are present, kernel switches otherwise: ``target_announcement`` says
        which and why).
        ``discovery=False`` runs the controller without link discovery (links are as the
        topology says): on links slowed to a few hundred packets/s, LLDP probes wait in the
        same queue as the data and arrive late, which the controller takes for cuts.
        ``routing`` is the controller's routing policy (``static``, ``reactive``,
        ``converge:SECONDS``; None: the controller's default). ``path_mode`` is how the
        fabric reads EVs (``ecmp``, ``structured``, ``srv6``; None: the controller's default,
        ``ecmp``); PathModeUnavailable for one the target cannot carry (on linux structured,
        and srv6 where the kernel lacks seg6local). ``backup`` runs a second controller
        beside the first, which takes over when the first dies (``testbed.controllers``).
        """
        from testbed.mininet.network import TestbedNetwork  # imports Mininet

        self.topology_ref = topology_ref
        self.discovery = discovery
        self.routing = routing
        self.backup = backup
        self.topology: Topology = load_topology(topology_ref)
        choice = choose_target(target, self.topology)
        self.target = choice.target.name
        #: What the target's switches can do (``controller.targets``).
        self.capabilities = choice.target.capabilities
        self.path_mode = None if path_mode is None else PathMode(path_mode)
        check_path_mode(choice.target, self.path_mode)
        #: One line: the target and why (asked for, or the default choice for this machine).
        self.target_announcement = choice.announcement
        self.network = TestbedNetwork(self.topology, target=self.target)
        #: The run's controllers (None until started).
        self.controllers: Controllers | None = None
        self.agents: HostAgents | None = None
        #: After :meth:`close`: what the teardown left, as a sentence ("nothing left").
        self.leftovers: str | None = None
        #: The collective jobs run on this testbed and their progress (the live page shows it).
        self.jobs = JobBoard()

    @classmethod
    def open(
        cls,
        topology_ref: str,
        target: str = AUTO,
        discovery: bool = True,
        routing: str | None = None,
        path_mode: str | None = None,
        backup: bool = False,
    ) -> contextlib.AbstractContextManager[Testbed]:
        """A started testbed for the ``with`` block, closed however the block ends."""
        return cls(topology_ref, target, discovery, routing, path_mode, backup).running()

    @contextlib.contextmanager
    def running(self) -> Iterator[Testbed]:
        """Start this testbed for the ``with`` block and close it however the block ends; in
        the main thread, SIGTERM and SIGHUP unwind it like Ctrl-C."""
        in_main = threading.current_thread() is threading.main_thread()
        with terminate_on_signals() if in_main else contextlib.nullcontext():
            try:
                self.start()
                yield self
            finally:
                self.close()

    @property
    def controller(self) -> ControllerRun | None:
        """The controller acting now: the primary, or the backup that took over (None before
        the start)."""
        return None if self.controllers is None else self.controllers.acting()

    @property
    def prefix(self) -> str:
        return self.network.prefix

    @property
    def run_dir(self) -> Path:
        return self.network.run_dir

    def start(self) -> None:
        """Network, controller (until every switch is in service), agents."""
        try:
            self.network.start()
            options: dict[str, Any] = {} if self.routing is None else {"routing": self.routing}
            if self.path_mode is not None:
                options["path_mode"] = str(self.path_mode)
            self.controllers = Controllers(
                self.topology_ref,
                self.run_dir,
                self.prefix,
                [s.name for s in self.topology.switches],
                backup=self.backup,
                discovery=self.discovery,
                target=self.target,
                options=options,
            )
            self.controllers.start()
            ref = Path(self.topology_ref)  # the agents' cwd may differ: absolute
            self.agents = HostAgents(
                self.topology,
                self.run_dir,
                self.prefix,
                None if self.path_mode is None else str(self.path_mode),
                str(ref.resolve()) if ref.is_file() else self.topology_ref,
            )
            self.agents.start()
            self._point_shells_at_agents(self.agents)
        except BaseException:
            self.close()
            raise

    def _point_shells_at_agents(self, agents: HostAgents) -> None:
        """Set ``MRC_AGENT_SOCKET`` in every host's shell to its agent's socket, so that a
        program started from the CLI (``h1 .venv/bin/python examples/api/...``) finds its
        host's agent the way an application finds ``/run/mrc-agent.sock`` on a real host."""
        for host in self.topology.hosts:
            path = shlex.quote(str(agents.socket_of(host.name)))
            self.network.host(host.name).cmd(f"export MRC_AGENT_SOCKET={path}")

    def close(self) -> str:
        """Stop the agents (which ends their transfers), the controller, then the network;
        returns what was left as a sentence ("nothing left" when all went)."""
        if self.agents is not None:
            _logged("stopping the agents", self.agents.stop)
        if self.controllers is not None:
            _logged("stopping the controllers", self.controllers.stop)
        self.leftovers = str(self.network.close())
        return self.leftovers

    def target_differences(self) -> list[str]:
        """What this run's target does not do that BMv2 does, one line each (none on bmv2);
        the kernel's qdiscs are probed where the target's ECN marking depends on them."""
        return differences(self.target, kernel_qdiscs_for(self.target))

    # -- operations ------------------------------------------------------------------------
    def fail(self, a: str, b: str) -> LinkId:
        """Cut the link between ``a`` and ``b`` (the controller finds out by itself)."""
        return self.network.cut(a, b)

    def restore(self, a: str, b: str) -> LinkId:
        """Bring a cut link back."""
        return self.network.restore(a, b)

    def controller_tracks(self, link: LinkId) -> bool:
        """Whether the controller keeps a state for ``link`` (on bmv2, switch-to-switch links
        only: hosts answer no LLDP probes)."""
        return any(entry["link"] == str(link) for entry in self.status()["links"])

    def wait_link_state(self, link: LinkId, down: bool, timeout: float) -> float | None:
        """Seconds until the controller sees ``link`` down (or up), None if not in ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if (str(link) in self.status()["down_links"]) == down:
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def power_off(self, switch: str, dark: bool = True) -> list[LinkId]:
        """A switch loses power under load: where the target restarts switches (bmv2) its
        process is killed (kill -9: its state is lost) and, with ``dark``, every link of it
        loses carrier, as a dark switch's neighbours see it (``dark=False``: a hung BMv2 whose
        ports stay lit); on linux, which has no switch process, its links go dark. Returns the
        links cut."""
        if self.capabilities.restart:
            self.network.kill_switch(switch)
        elif not dark:
            from testbed.mininet.network import NotApplicable

            raise NotApplicable(f"{switch}: {self.capabilities.lacks[Feature.RESTART]}")
        if not dark:
            return []
        return [self._cut_link(link) for link in self.network.switch_links(switch)]

    def power_on(self, switch: str, links: list[LinkId]) -> float | None:
        """Bring a powered-off switch back: on bmv2 start its process (empty) and wait until
        the controller has reprogrammed it, then light its ``links``; on linux light them.
        Returns the seconds the switch took to serve and be reprogrammed (None on linux)."""
        took = None
        if self.capabilities.restart:
            mark = self.event_count()
            started = time.monotonic()
            self.network.start_switch(switch)
            self.wait_in_service([switch], after=mark)
            took = time.monotonic() - started
        for link in links:
            self.network.restore(str(link.a), str(link.b))
        return took

    def _cut_link(self, link: LinkId) -> LinkId:
        return self.network.cut(str(link.a), str(link.b))

    def set_fabric_loss(self, rate: float) -> None:
        """Drop UDP 4791 on every fabric link with probability ``rate``, never LLDP."""
        self.network.set_fabric_loss(rate)

    def clear_fabric_loss(self) -> None:
        """Every fabric link lossless again."""
        self.network.clear_fabric_loss()

    def fabric_loss_counters(self) -> tuple[dict[str, Any], int]:
        """Per link direction the UDP 4791 frames seen and dropped, and LLDP let through."""
        return self.network.fabric_loss_counters()

    def nic_tx_packets(self, host: str) -> dict[str, int]:
        """Packets each NIC of ``host`` has sent (its kernel's counters)."""
        return self.network.nic_tx_packets(host)

    def restart(self, switch: str) -> int:
        """kill -9 a switch and start it again empty; returns its new pid once it serves.
        The controller notices and reprograms it (see :meth:`wait_in_service`). On linux,
        NotApplicable (``testbed.mininet.kernel_switch``)."""
        return self.network.restart_switch(switch)

    def wait_in_service(self, switches: list[str], after: int) -> None:
        """Wait until the controller put ``switches`` in service after event index ``after``."""
        self._controller().wait_in_service(switches, after=after)

    def event_count(self) -> int:
        """How many controller events exist now (an ``after`` for :meth:`wait_in_service`)."""
        return len(self._controller().events())

    def status(self) -> dict[str, Any]:
        """The acting controller's status snapshot (StatusUnavailable when none is alive)."""
        if self.controllers is None:
            raise RuntimeError("the testbed is not started")
        return self.controllers.status()

    def kill_controller(self, name: str = "primary") -> float:
        """kill -9 the controller started as ``name`` (``primary``, ``backup``); the
        monotonic time of the kill."""
        return self._controllers().kill(name)

    def restart_controller(self, name: str = "primary") -> str:
        """Start a dead controller again; the role it holds once connected everywhere."""
        return self._controllers().restart(name)

    def transfer(
        self, spec: TransferSpec, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Run a transfer to completion through the source host's agent; its result (the
        JSON ``mrc-perf --json`` prints), or TransferFailed."""
        return self._agents().transfer(spec, on_progress, self.network.cut_links)

    def transfer_all(
        self,
        specs: list[TransferSpec],
        on_progress: list[ProgressCallback | None] | None = None,
    ) -> list[dict[str, Any] | TransferFailed]:
        """Run transfers at the same time; each one's result or failure, in order;
        ``on_progress[i]`` gets the samples of ``specs[i]``."""
        return self._agents().transfer_all(specs, self.network.cut_links, on_progress)

    def collective(
        self, hosts: list[str], spec: JobSpec, hooks: JobHooks | None = None
    ) -> JobResult:
        """Run a collective job, rank r on ``hosts[r]`` (``testbed.collective_run``); its
        progress is published on :attr:`jobs` as it runs."""
        agents = self._agents()
        job = self.jobs.begin(spec, hosts)
        try:
            result = run_collective(agents, hosts, spec, self.jobs.hooks(job, hooks))
        except BaseException as error:
            self.jobs.fail(job, str(error) or type(error).__name__)
            raise
        self.jobs.finish(job, result)
        return result

    def _controller(self) -> ControllerRun:
        return self._controllers().acting()

    def _controllers(self) -> Controllers:
        if self.controllers is None:
            raise RuntimeError("the testbed is not started")
        return self.controllers

    def _agents(self) -> HostAgents:
        if self.agents is None:
            raise RuntimeError("the testbed is not started")
        return self.agents


def _logged(what: str, action: Any) -> None:
    """One teardown step; a failure is logged and the teardown goes on."""
    try:
        action()
    except Exception:
        log.exception("teardown: %s failed", what)
