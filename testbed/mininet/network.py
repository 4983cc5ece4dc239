"""Bring a topology up in Mininet, operate it, and tear it all down.

    with running_network(load_topology("leaf-spine")) as net:    # target="linux" for kernel
        net.cut("l1", "s1")            # patch ends down: both switches see carrier loss
        net.restore("l1", "s1")
        net.restart_switch("s2")       # bmv2: kill -9, start again with the same options
        net.set_queue("l1", 3, rate_pps=500, depth=32)
        net.set_fabric_loss(0.01)      # 1 % of UDP 4791 frames on every fabric link, never LLDP

What comes up, on the ``bmv2`` target (default): every switch as a ``simple_switch_grpc`` in
the root namespace with no program (the controller pushes it); on the ``linux`` target: every
switch as a namespace of its own forwarding in the kernel, ports ``swpN``, with no forwarding
state (the controller writes it; see ``kernel_switch``). On both, every host in a named
namespace with the topology's NICs configured, every switch-to-switch link patched through a
bridge in the patch-panel namespace (see ``patch_panel``), offloads off on both ends of every
veth. Mininet's TCLink shaping is not used (it needs netem, which some kernels lack): the
bottleneck is the switch's own egress queue, set with :meth:`TestbedNetwork.set_queue` (BMv2's
queue over Thrift, or a ``tbf`` on a kernel switch's port).

Teardown runs on every exit: normal, exception, Ctrl-C, SIGTERM/SIGHUP (turned into
KeyboardInterrupt by :func:`running_network`), and interpreter exit (atexit) for a network
that was never closed. It ends with a sweep of everything named after the run's prefix, which
is also what ``python -m testbed.mininet clean`` does for runs whose owner was killed.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from mininet.net import Mininet

from controller.targets import DEFAULT_TARGET
from hostenv.netns import terminate_on_signals
from testbed.bmv2 import Bmv2Options, thrift_cli
from testbed.mininet.bmv2_switch import Bmv2Switch
from testbed.mininet.cleanup import Leftovers, sweep
from testbed.mininet.host_config import offloads_off, sysctl
from testbed.mininet.kernel_switch import KernelSwitch, NotApplicable
from testbed.mininet.link_loss import LossCounters
from testbed.mininet.naming import PATCH_PANEL_NODE
from testbed.mininet.patch_panel import PatchPanel
from testbed.mininet.preflight import preflight_problems
from testbed.mininet.runs import allocate_prefix, remove_record, runs_root, write_record
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.switch_target import switch_target
from testbed.mininet.system import run_all_in
from testbed.mininet.testbed_host import TestbedHost
from testbed.mininet.wiring import Wiring, plan_wiring
from topologies.link_lookup import find_link
from topologies.model import LinkId, Topology

__all__ = [
    "BringUpError",
    "NotApplicable",
    "SwitchNode",
    "TestbedNetwork",
    "preflight_problems",
    "running_network",
]

log = logging.getLogger(__name__)

#: A switch of either target.
SwitchNode = Bmv2Switch | KernelSwitch


class BringUpError(RuntimeError):
    """The network cannot come up here; raised before anything is created."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("cannot bring the topology up:\n  - " + "\n  - ".join(problems))
        self.problems = problems


class TestbedNetwork:
    """One topology running in Mininet; construct, :meth:`start`, and always :meth:`close`."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        topology: Topology,
        *,
        target: str = DEFAULT_TARGET,
        keep_logs: bool = False,
        startup_timeout: float = 30.0,
        runs_dir: Path | None = None,
    ) -> None:
        """Plan the run (prefix, names); nothing on the machine changes until :meth:`start`.
        ValueError for a target the testbed cannot start (``switch_target``)."""
        self.topology = topology
        #: The target's name, and how Mininet runs its switches.
        self.target = target
        self.kind: SwitchKind = switch_target(target).kind
        self.keep_logs = keep_logs
        self.startup_timeout = startup_timeout
        root = runs_dir or runs_root()
        self.prefix = allocate_prefix(root)
        self.run_dir = root / self.prefix
        self.wiring: Wiring = plan_wiring(topology, self.prefix, self.kind)
        self.mininet: Mininet | None = None
        self.patch_panel: PatchPanel | None = None
        self.leftovers: Leftovers | None = None
        self._cut: set[LinkId] = set()
        self._started = False
        self._closed = False

    # -- life cycle --------------------------------------------------------------------------
    def start(self) -> TestbedNetwork:
        """Create everything and start every switch; on any failure, tear down and re-raise."""
        if self._started:
            raise RuntimeError(f"run {self.prefix} was already started")
        problems = preflight_problems(self.topology, self.kind)
        if problems:
            raise BringUpError(problems)
        self.run_dir.mkdir(parents=True)
        write_record(self.run_dir, self.topology.name)
        self._started = True
        atexit.register(self.close)
        try:
            self._create_nodes()
            self._create_links()
            assert self.mininet is not None
            self.mininet.build()  # configures the hosts (TestbedHost.config)
            self.mininet.start()  # BMv2: launches them all, then waits for each; linux: ports up
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> Leftovers:
        """Stop every switch and node and sweep the run's prefix; returns what is left (empty
        unless something refused to go, which is also logged). Safe to call more than once."""
        if self._closed or not self._started:
            return self.leftovers or Leftovers((), (), ())
        self._closed = True
        atexit.unregister(self.close)
        for switch in self._switch_nodes():
            if isinstance(switch, Bmv2Switch):
                _logged(f"stopping {switch.name}", switch.stop_process)
        if self.mininet is not None:
            nodes = [*self.mininet.hosts, *self.mininet.switches]
            if self.patch_panel is not None:
                nodes.append(self.patch_panel)
            for node in nodes:
                _logged(f"terminating {node.name}", node.terminate)
        self.leftovers = sweep(self.prefix)
        if not self.leftovers.empty:
            log.warning("run %s: teardown left %s", self.prefix, self.leftovers)
        remove_record(self.run_dir)
        if not self.keep_logs:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        return self.leftovers

    def __enter__(self) -> TestbedNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- access ------------------------------------------------------------------------------
    def host(self, name: str) -> TestbedHost:
        """The Mininet host ``name``."""
        node = self._net()[name]
        if not isinstance(node, TestbedHost):
            raise KeyError(f"{name!r} is not a host")
        return node

    def switch(self, name: str) -> SwitchNode:
        """The Mininet switch ``name``."""
        node = self._net()[name]
        if not isinstance(node, Bmv2Switch | KernelSwitch):
            raise KeyError(f"{name!r} is not a switch")
        return node

    def bmv2_switch(self, name: str) -> Bmv2Switch:
        """The BMv2 switch ``name``; NotApplicable on the linux target."""
        node = self.switch(name)
        if not isinstance(node, Bmv2Switch):
            raise NotApplicable(f"{name} is a kernel switch (target {self.target}), not a BMv2")
        return node

    def grpc_address(self, switch: str) -> str:
        """Where the switch's P4Runtime server listens (bmv2 only: NotApplicable on linux)."""
        return self.bmv2_switch(switch).bmv2.grpc_addr

    def switch_netns(self, switch: str) -> str | None:
        """The named namespace the switch's ports live in; None: the root namespace (bmv2)."""
        return self.wiring.switch_netns[switch]

    @property
    def cut_links(self) -> frozenset[LinkId]:
        """Links cut through this object and not restored (the controller's link state)."""
        return frozenset(self._cut)

    # -- operations --------------------------------------------------------------------------
    def cut(self, a: str, b: str) -> LinkId:
        """Cut the link between ``a`` and ``b`` (names, or ``node:port``) without ever setting
        a switch's own interface down: a host link from the host's side, a switch link at the
        patch panel; the switch ends only lose carrier, on either target."""
        link_id = find_link(self.topology, a, b).id
        if link_id in self.wiring.host_link_ids:
            nic = self.wiring.nic_for(link_id)
            self.host(nic.host).cut_nic(nic.nic.name)
        else:
            self._panel().cut(self.wiring.patch_for(link_id))
        self._cut.add(link_id)
        return link_id

    def restore(self, a: str, b: str) -> LinkId:
        """Undo :meth:`cut` (a host NIC gets its addresses, neighbours and routes back)."""
        link_id = find_link(self.topology, a, b).id
        if link_id in self.wiring.host_link_ids:
            nic = self.wiring.nic_for(link_id)
            self.host(nic.host).restore_nic(nic.nic.name)
        else:
            self._panel().restore(self.wiring.patch_for(link_id))
        self._cut.discard(link_id)
        return link_id

    def link_state(self, a: str, b: str) -> dict[str, bool]:
        """Whether each switch end of the link between ``a`` and ``b`` is up, as the switch
        sees it (BMv2's port status; a kernel switch's carrier in its namespace; hosts have no
        entry): what a cut or restore has reached so far."""
        link = find_link(self.topology, a, b)
        return {
            end.node: self.switch(end.node).port_status().get(end.port, False)
            for end in (link.a, link.b)
            if not self.topology.is_host(end.node)
        }

    def set_fabric_loss(self, rate: float) -> None:
        """Drop UDP 4791 frames on every switch-to-switch link, in both directions, each with
        probability ``rate``; never LLDP (see ``link_loss``). Replaces an earlier rate and
        starts its counters afresh."""
        self._panel().set_loss(rate, self.wiring.patches)

    def clear_fabric_loss(self) -> None:
        """Remove the loss rules: every link lossless again."""
        if self.patch_panel is not None:
            self.patch_panel.clear_loss()

    def fabric_loss_counters(self) -> tuple[dict[str, LossCounters], int]:
        """Per link direction (``"l1:3->s1"``) the UDP 4791 frames the loss rules saw and
        dropped since :meth:`set_fabric_loss`, and the LLDP frames they let through."""
        return self._panel().loss_counters()

    def switch_links(self, name: str) -> list[LinkId]:
        """Every link of switch ``name`` (to switches and to hosts), in topology order."""
        self.topology.switch(name)  # KeyError for a name that is no switch
        return [link.id for link in self.topology.all_links if name in (link.a.node, link.b.node)]

    def kill_switch(self, name: str) -> None:
        """kill -9 the switch's BMv2, leaving it dead until :meth:`start_switch`; its ports
        keep their carrier (cut them to make it dark). NotApplicable on linux."""
        self.bmv2_switch(name).kill()

    def start_switch(self, name: str) -> int:
        """Start a killed switch's BMv2 again, empty; returns its pid once it serves."""
        switch = self.bmv2_switch(name)
        switch.launch()
        switch.wait_serving(self.startup_timeout)
        pid = switch.bmv2_pid
        assert pid is not None
        return pid

    def nic_tx_packets(self, host: str) -> dict[str, int]:
        """Packets each of ``host``'s NICs has sent since bring-up (its kernel's counters)."""
        return self.host(host).tx_packets()

    def restart_switch(self, name: str) -> int:
        """kill -9 the switch's BMv2 and start it again with the same options; returns the new
        pid once it serves again. It comes back empty: its controller reprograms it.
        NotApplicable on the linux target (see ``kernel_switch``)."""
        return self.switch(name).restart(self.startup_timeout)

    def set_queue(
        self, switch: str, port: int, rate_pps: int, depth: int, priority: int = 0
    ) -> None:
        """Set the rate (packets/s, 0 = unlimited) and depth (packets) of one egress queue of
        one port: on BMv2 one priority queue, over Thrift (BMv2 has no P4Runtime call for it);
        on a kernel switch the port's ``tbf`` (see ``KernelSwitch.set_queue``).

        Priorities are ``controller.southbound.queues.QueuePriority``'s: 0 the normal queue
        (the bottleneck for ECN and trimming), 1 the lossless RoCE class (RoCE data), 2 the
        high-priority queue (control packets, trimmed headers, RoCE ACK/NAK and CNP), each
        limited separately. A kernel switch has one queue per port (no trimming and no lossless
        class, so no other queue).
        """
        node = self.switch(switch)
        if port not in self.wiring.switch_ports[switch]:
            raise ValueError(f"{switch} has no port {port} in topology {self.topology.name!r}")
        if rate_pps < 0:
            raise ValueError(f"queue rate must be >= 0 packets/s (0 = unlimited), not {rate_pps}")
        if depth < 1:
            raise ValueError(f"queue depth must be at least 1 packet, not {depth}")
        if isinstance(node, KernelSwitch):
            if priority != 0:
                raise ValueError(
                    f"the linux target has one queue per port (no trimming, so no "
                    f"high-priority queue, and no lossless RoCE class): priority must be 0, "
                    f"not {priority}"
                )
            node.set_queue(port, rate_pps, depth)
            return
        if not 0 <= priority < node.bmv2.priority_queues:
            raise ValueError(
                f"priority must be in 0..{node.bmv2.priority_queues - 1}, not {priority}"
            )
        thrift_cli(
            [
                f"set_queue_rate {rate_pps} {port} {priority}",
                f"set_queue_depth {depth} {port} {priority}",
            ],
            node.bmv2.thrift_port,
        )

    def summary(self) -> str:
        """What is running, in a few lines per node (the CLI prints this)."""
        lines = [
            f"topology {self.topology.name} up as run {self.prefix} on target {self.target} "
            f"(logs: {self.run_dir})"
        ]
        for switch in self.topology.switches:
            node = self.switch(switch.name)
            if isinstance(node, KernelSwitch):
                lines.append(f"  {switch.name:<10} {node.summary_line()}")
                continue
            ports = ", ".join(
                f"{port}@{ifname}" for port, ifname in self.wiring.switch_ports[switch.name].items()
            )
            lines.append(
                f"  {switch.name:<10} device {switch.device_id} pid {node.bmv2_pid} "
                f"gRPC {node.bmv2.grpc_addr} Thrift {switch.thrift_port}  ports {ports}"
            )
        for host in self.topology.hosts:
            nics = "; ".join(
                f"{nic.name} {nic.ipv4} {nic.ipv6} -> {nic.switch}:{nic.switch_port}"
                for nic in host.nics
            )
            lines.append(f"  {host.name:<10} netns {self.wiring.host_netns(host.name)}  {nics}")
        if self.wiring.patches:
            lines.append(f"  switch links patched in netns {self.wiring.patch_panel_netns}")
        return "\n".join(lines)

    # -- building ------------------------------------------------------------------------------
    def _create_nodes(self) -> None:
        net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False)
        self.mininet = net
        for switch in self.topology.switches:
            self._add_switch(net, switch.name)
        for host in self.topology.hosts:
            net.addHost(
                host.name,
                cls=TestbedHost,
                netns=self.wiring.host_netns(host.name),
                nics=self.wiring.nics_of(host.name),
                ip=None,
            )
        if self.wiring.patches:
            self.patch_panel = PatchPanel(PATCH_PANEL_NODE, netns=self.wiring.patch_panel_netns)
            # Reachable by name in the Mininet CLI (`patch-panel ip link`), but not a host.
            net.nameToNode[PATCH_PANEL_NODE] = self.patch_panel

    def _add_switch(self, net: Mininet, name: str) -> None:
        switch = self.topology.switch(name)
        ports = self.wiring.switch_ports[name]
        if self.kind is SwitchKind.KERNEL:
            netns = self.wiring.switch_netns[name]
            assert netns is not None
            net.addSwitch(name, cls=KernelSwitch, netns=netns, ports=ports)
            return
        net.addSwitch(
            name,
            cls=Bmv2Switch,
            bmv2=Bmv2Options(
                ports=ports,
                device_id=switch.device_id,
                grpc_port=switch.grpc_port,
                thrift_port=switch.thrift_port,
                cpu_port=self.topology.settings.cpu_port,
                log_dir=self.run_dir,
            ),
            startup_timeout=self.startup_timeout,
        )

    def _create_links(self) -> None:
        net = self._net()
        for nic in self.wiring.host_nics:
            switch = self.topology.switch(nic.nic.switch)
            net.addLink(
                self.switch(switch.name),
                self.host(nic.host),
                port1=nic.nic.switch_port,
                port2=nic.nic.index,
                intfName1=nic.switch_ifname,
                intfName2=nic.nic.name,
                addr1=nic.gateway_mac,
                addr2=nic.nic.mac,
                up=False,
            )
        panel = self.patch_panel
        patch_ends = [end for patch in self.wiring.patches for end in patch.ends]
        for panel_port, end in enumerate(patch_ends, start=1):
            assert panel is not None
            net.addLink(
                self.switch(end.switch),
                panel,
                port1=end.port,
                port2=panel_port,
                intfName1=end.switch_ifname,
                intfName2=end.panel_ifname,
                addr1=self.topology.switch(end.switch).port_mac(end.port),
                up=False,
            )
        for switch_name, ports in self.wiring.switch_ports.items():
            if self.wiring.switch_netns[switch_name] is not None:
                continue  # a kernel switch brings its own ports up (KernelSwitch.start)
            for ifname in ports.values():
                run_all_in(
                    None,
                    [
                        sysctl(f"net.ipv6.conf.{ifname}.disable_ipv6", 1),
                        offloads_off(ifname),
                        ("ip", "link", "set", "dev", ifname, "up"),
                    ],
                )
        for patch in self.wiring.patches:
            assert panel is not None
            panel.join(patch)

    def _net(self) -> Mininet:
        if self.mininet is None:
            raise RuntimeError(f"run {self.prefix} is not started")
        return self.mininet

    def _panel(self) -> PatchPanel:
        if self.patch_panel is None:
            raise RuntimeError(f"run {self.prefix} has no patch panel")
        return self.patch_panel

    def _switch_nodes(self) -> list[SwitchNode]:
        if self.mininet is None:
            return []
        return [
            node for node in self.mininet.switches if isinstance(node, Bmv2Switch | KernelSwitch)
        ]


@contextlib.contextmanager
def running_network(
    topology: Topology,
    *,
    target: str = DEFAULT_TARGET,
    keep_logs: bool = False,
    startup_timeout: float = 30.0,
    runs_dir: Path | None = None,
) -> Iterator[TestbedNetwork]:
    """Bring ``topology`` up for the ``with`` block; tear it down however the block ends.

    In the main thread, SIGTERM and SIGHUP become KeyboardInterrupt for the duration, so a
    killed test run or a closed terminal unwinds through the teardown as Ctrl-C does.
    """
    network = TestbedNetwork(
        topology,
        target=target,
        keep_logs=keep_logs,
        startup_timeout=startup_timeout,
        runs_dir=runs_dir,
    )
    in_main = threading.current_thread() is threading.main_thread()
    with terminate_on_signals() if in_main else contextlib.nullcontext():
        network.start()
        try:
            yield network
        finally:
            network.close()


def _logged(what: str, action: Callable[[], object]) -> None:
    """Run one teardown step; a failure is logged and the teardown goes on."""
    try:
        action()
    except Exception:
        log.exception("teardown: %s failed", what)
