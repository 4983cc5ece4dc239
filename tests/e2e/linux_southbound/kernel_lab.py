"""A topology as bare network namespaces, wired the way the runner wires the linux target.

Each switch is a namespace ``<prefix>-<switch>`` whose port N is ``swpN`` with the topology's
MAC; each host a namespace with its NICs configured as the runner configures them (static
gateway neighbour, plane routes: :mod:`testbed.mininet.host_config`). Links are direct veth
pairs (no patch panel: the tests cut a link by setting one end down, which the other end sees
as carrier loss). Nothing forwards until a southbound programs the switches.

Everything lives in namespaces of the lab's own prefix and goes when the lab closes (deleting
a namespace deletes its veths), on any exit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from hostenv.netns import NetnsLab, disable_offloads, run
from testbed.mininet.host_config import host_sysctls, nic_bring_up, nic_prepare
from testbed.mininet.wiring import FIRST_NIC_TABLE, HostNicWiring
from topologies.model import Endpoint, Topology


@dataclass
class KernelFabricLab:
    """The namespaces of one topology (see the module docs)."""

    topology: Topology
    netns: NetnsLab

    @property
    def prefix(self) -> str:
        """The run prefix: switch ``s`` is the namespace ``<prefix>-s``."""
        return self.netns.prefix

    def namespace(self, node: str) -> str:
        """The namespace of a switch or host."""
        return f"{self.prefix}-{node}"

    def run_in(self, node: str, args: Sequence[str], *, check: bool = True) -> str:
        """Run a command inside ``node``'s namespace; its stdout."""
        return run(args, check=check, netns=self.namespace(node))

    def set_port(self, end: Endpoint, up: bool) -> None:
        """Set the interface at ``end`` (a switch port or a host NIC) up or down."""
        ifname = self._ifname(end)
        self.run_in(end.node, ["ip", "link", "set", "dev", ifname, "up" if up else "down"])

    def build(self) -> None:
        """Create every namespace and veth, and configure the hosts."""
        topology = self.topology
        for node in [switch.name for switch in topology.switches] + [
            host.name for host in topology.hosts
        ]:
            self.netns.add_netns(node)
        for link in topology.all_links:
            self._add_veth(link.a, link.b)
        for host in topology.hosts:
            for command in host_sysctls():
                self.run_in(host.name, command)
            for offset, nic in enumerate(host.nics):
                wiring = HostNicWiring(
                    host=host.name,
                    nic=nic,
                    plane=topology.plane(nic.plane),
                    netns=self.namespace(host.name),
                    switch_ifname=f"swp{nic.switch_port}",
                    gateway_mac=topology.switch(nic.switch).port_mac(nic.switch_port),
                    table=FIRST_NIC_TABLE + offset,
                    link_id=host.link(nic).id,
                )
                for command in (*nic_prepare(wiring), *nic_bring_up(wiring)):
                    self.run_in(host.name, command)

    def _ifname(self, end: Endpoint) -> str:
        if self.topology.is_host(end.node):
            return self.topology.host(end.node).nics[end.port].name
        return f"swp{end.port}"

    def _mac(self, end: Endpoint) -> str:
        if self.topology.is_host(end.node):
            return self.topology.host(end.node).nics[end.port].mac
        return self.topology.switch(end.node).port_mac(end.port)

    def _add_veth(self, a: Endpoint, b: Endpoint) -> None:
        # Both ends are made inside their namespaces: nothing is ever left in the root one.
        run(
            [
                "ip", "link", "add",
                "name", self._ifname(a), "netns", self.namespace(a.node), "address", self._mac(a),
                "type", "veth", "peer",
                "name", self._ifname(b), "netns", self.namespace(b.node), "address", self._mac(b),
            ]
        )  # fmt: skip
        for end in (a, b):
            disable_offloads(self._ifname(end), self.namespace(end.node))
            if not self.topology.is_host(end.node):
                self.set_port(end, True)


@contextmanager
def kernel_fabric(topology: Topology) -> Iterator[KernelFabricLab]:
    """The topology built in fresh namespaces, removed on exit whatever happens."""
    with NetnsLab() as netns:
        lab = KernelFabricLab(topology, netns)
        lab.build()
        yield lab


def udp_flows_arrive(
    lab: KernelFabricLab,
    sender: str,
    receiver: str,
    destination: str,
    source_ports: Sequence[int],
    port: int = 45000,
) -> set[int]:
    """Send one UDP datagram to ``destination`` from each source port in ``source_ports`` (one
    flow each, so the switches hash each on its own) and return the source ports whose
    datagram arrived at ``receiver``."""
    family = "AF_INET6" if ":" in destination else "AF_INET"
    receive = (
        "import socket,sys\n"
        f"s=socket.socket(socket.{family},socket.SOCK_DGRAM)\n"
        f"s.bind(('', {port}))\n"
        "s.settimeout(2.0)\n"
        "print('ready',flush=True)\n"
        "seen=set()\n"
        "try:\n"
        f"    while len(seen)<{len(source_ports)}:\n"
        "        data,addr=s.recvfrom(100)\n"
        "        seen.add(addr[1])\n"
        "except TimeoutError:\n"
        "    pass\n"
        "print(' '.join(map(str,sorted(seen))))\n"
    )
    send = (
        "import socket\n"
        f"for p in {list(source_ports)!r}:\n"
        f"    s=socket.socket(socket.{family},socket.SOCK_DGRAM)\n"
        "    s.bind(('', p))\n"
        f"    s.sendto(b'x',({destination!r},{port}))\n"
        "    s.close()\n"
    )
    listener = subprocess.Popen(
        ["ip", "netns", "exec", lab.namespace(receiver), "python3", "-c", receive],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None
        if listener.stdout.readline().strip() != "ready":
            raise RuntimeError("the UDP receiver did not start")
        lab.run_in(sender, ["python3", "-c", send])
        output, _ = listener.communicate(timeout=10)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.wait()
    return {int(word) for word in output.split()}
